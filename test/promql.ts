/**
 * What a PromQL expression reads, from Prometheus's own grammar (@prometheus-io/lezer-promql, the parser
 * of Prometheus's web UI): the metrics it selects with the labels it matches or groups by on each, the
 * labels its result keeps, and its syntax errors. For test/integration/monitoring.test.ts.
 */
import { parser } from '@prometheus-io/lezer-promql';

type SyntaxNode = ReturnType<typeof parser.parse>['topNode'];

export interface PromqlUse {
  /** Metric name → the labels the expression needs on its series (matchers, and grouping over it). */
  metrics: Map<string, Set<string>>;
  /** The labels the result keeps: the `by` labels of the outermost aggregation (undefined: no aggregation, all kept). */
  resultLabels: Set<string> | undefined;
  /** Where the expression does not parse (empty when it does). */
  errors: string[];
}

function children(node: SyntaxNode, name: string): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  for (let c = node.firstChild; c !== null; c = c.nextSibling) if (c.type.name === name) out.push(c);
  return out;
}

function descendants(node: SyntaxNode, name: string): SyntaxNode[] {
  const out: SyntaxNode[] = [];
  const cursor = node.cursor();
  do {
    if (cursor.type.name === name) out.push(cursor.node);
  } while (cursor.next() && cursor.from < node.to);
  return out.filter((n) => n.from >= node.from && n.to <= node.to);
}

export function promqlUse(expr: string): PromqlUse {
  const tree = parser.parse(expr);
  const text = (n: SyntaxNode) => expr.slice(n.from, n.to);
  const errors: string[] = [];
  tree.iterate({ enter: (n) => void (n.type.isError ? errors.push(`at ${n.from}: …${expr.slice(Math.max(0, n.from - 20), n.from + 20)}…`) : undefined) });
  const metrics = new Map<string, Set<string>>();
  const need = (metric: string, label: string) => metrics.get(metric)!.add(label);
  for (const selector of descendants(tree.topNode, 'VectorSelector')) {
    const name = children(selector, 'Identifier')[0];
    if (name === undefined) continue;
    metrics.set(text(name), metrics.get(text(name)) ?? new Set());
    for (const label of descendants(selector, 'LabelName')) need(text(name), text(label));
  }
  // `sum by (l) (…)`: every series the aggregation reads must carry l.
  let resultLabels: Set<string> | undefined;
  for (const agg of descendants(tree.topNode, 'AggregateExpr')) {
    const grouping = descendants(agg, 'AggregateModifier').find((m) => m.parent?.from === agg.from && m.parent.to === agg.to);
    const labels = grouping === undefined ? [] : descendants(grouping, 'LabelName').map(text);
    resultLabels ??= new Set(labels);
    for (const selector of descendants(agg, 'VectorSelector')) {
      const name = children(selector, 'Identifier')[0];
      if (name !== undefined) for (const l of labels) need(text(name), l);
    }
  }
  return { metrics, resultLabels, errors };
}
