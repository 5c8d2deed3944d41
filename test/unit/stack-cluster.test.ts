// The cluster layout of the local stack (src/stack/cluster.ts): addresses, ports, tokens, the layout file.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { clusterDefaults, initialToken, kafkaNode, readLayout, sharedClusterId, stackNodes, writeLayout } from '../../src/stack/cluster.js';
import { defaultStackOptions } from '../../src/stack/options.js';

test('1 + 1 is the single-node stack under its old names and addresses', () => {
  assert.deepEqual(
    stackNodes(defaultStackOptions({ dir: '/x' })).map((n) => [n.id, n.host, n.port]),
    [['kafka', '127.0.0.1', 9092], ['cassandra', '127.0.0.1', 9042]],
  );
});

test('3 + 3: brokers on 29192/29292/29392, nodes on 127.0.0.2-4 with the standard port', () => {
  const o = defaultStackOptions({ dir: '/x', cassandraNodes: 3, kafkaBrokers: 3 });
  assert.deepEqual(
    stackNodes(o).map((n) => [n.id, n.host, n.port]),
    [
      ['kafka1', '127.0.0.1', 29192],
      ['kafka2', '127.0.0.1', 29292],
      ['kafka3', '127.0.0.1', 29392],
      ['cassandra1', '127.0.0.2', 9042],
      ['cassandra2', '127.0.0.3', 9042],
      ['cassandra3', '127.0.0.4', 9042],
    ],
  );
  const k = kafkaNode(o, 2);
  assert.equal(k.voters, '1@127.0.0.1:29193,2@127.0.0.1:29293,3@127.0.0.1:29393');
  assert.deepEqual([k.nodeId, k.port, k.controllerPort, k.replication, k.minIsr], [2, 29292, 29293, 3, 2]);
  assert.deepEqual([kafkaNode({ ...o, kafkaBrokers: 2 }, 1).replication, kafkaNode({ ...o, kafkaBrokers: 2 }, 1).minIsr], [2, 1]);
});

test('initial tokens are evenly spaced Murmur3 tokens', () => {
  assert.deepEqual([1, 2, 3].map((i) => initialToken(i, 3)), ['-9223372036854775808', '-3074457345618258603', '3074457345618258602']);
  assert.equal(initialToken(1, 1), '-9223372036854775808');
});

test('the layout file gives the connection defaults and replication of a cluster; none for one node', (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-layout-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.equal(readLayout(dir), null);
  assert.equal(clusterDefaults(dir), null);
  writeLayout(defaultStackOptions({ dir }));
  assert.equal(clusterDefaults(dir), null);
  writeLayout(defaultStackOptions({ dir, cassandraNodes: 3, kafkaBrokers: 3 }));
  assert.deepEqual(clusterDefaults(dir), {
    brokers: '127.0.0.1:29192,127.0.0.1:29292,127.0.0.1:29392',
    cassandra: '127.0.0.2,127.0.0.3,127.0.0.4',
    keyspaceReplication: 'NetworkTopologyStrategy:datacenter1=3',
    topicReplication: 3,
  });
  writeLayout(defaultStackOptions({ dir, cassandraNodes: 5, kafkaBrokers: 2 }));
  assert.equal(clusterDefaults(dir)?.keyspaceReplication, 'NetworkTopologyStrategy:datacenter1=3');
  assert.equal(clusterDefaults(dir)?.topicReplication, 2);
});

test('every broker of a stack is formatted with the same cluster id, made once', (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-clusterid-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const id = sharedClusterId(dir);
  assert.match(id, /^[A-Za-z0-9_][A-Za-z0-9_-]{21}$/);
  assert.equal(sharedClusterId(dir), id);
});

test('a Schema Registry joins the stack last, on its port, single node or cluster, and the layout remembers it', (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-layout-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const one = defaultStackOptions({ dir, schemaRegistry: true, registryPort: 8381 });
  assert.deepEqual(stackNodes(one).map((n) => [n.id, n.kind, n.host, n.port]), [['kafka', 'kafka', '127.0.0.1', 9092], ['cassandra', 'cassandra', '127.0.0.1', 9042], ['registry', 'registry', '127.0.0.1', 8381]]);
  const cluster = defaultStackOptions({ dir, schemaRegistry: true, cassandraNodes: 3, kafkaBrokers: 3 });
  assert.deepEqual(stackNodes(cluster).map((n) => n.id), ['kafka1', 'kafka2', 'kafka3', 'cassandra1', 'cassandra2', 'cassandra3', 'registry']);
  assert.deepEqual(stackNodes(defaultStackOptions({ dir })).map((n) => n.id), ['kafka', 'cassandra']);
  writeLayout(one);
  assert.equal(readLayout(dir)?.registryPort, 8381);
  writeLayout(defaultStackOptions({ dir }));
  assert.equal(readLayout(dir)?.registryPort, undefined);
});
