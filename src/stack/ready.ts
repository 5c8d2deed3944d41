/**
 * "Is it serving?" probes. Each answers true/false, never throws and never logs, so polling them
 * during start-up cannot spam the console.
 */
import net from 'node:net';
import cassandra from 'cassandra-driver';
import { canConnect } from './process.js';

/**
 * Kafka is ready when a Metadata request lists at least one broker: the broker only serves requests
 * once started, and lists itself only once registered and unfenced with the controller, i.e. when
 * topics can be created. A raw request (Metadata v4, non-flexible, still supported by Kafka 4 after
 * KIP-896) keeps the stack free of the native client, so `stack up` works even if it failed to build.
 * https://kafka.apache.org/protocol#The_Messages_Metadata
 */
export async function kafkaReady(port: number, timeoutMs = 3000): Promise<boolean> {
  if (!(await canConnect(port))) return false;
  return metadataBrokerCount(port, timeoutMs).then((n) => n > 0, () => false);
}

/** How many brokers a Metadata request to 127.0.0.1:`port` lists (registered and unfenced); rejects if it cannot ask. */
export function metadataBrokerCount(port: number, timeoutMs = 3000): Promise<number> {
  const clientId = Buffer.from('exactlyonce-stack');
  // Request header v1: api_key, api_version, correlation_id, client_id (int16-length string).
  // Metadata v4 body: topics = [] (no topics, just brokers), allow_auto_topic_creation = false.
  const request = Buffer.alloc(4 + 2 + 2 + 4 + 2 + clientId.length + 4 + 1);
  let at = request.writeInt32BE(request.length - 4, 0);
  at = request.writeInt16BE(3, at); // api_key: Metadata
  at = request.writeInt16BE(4, at); // api_version
  at = request.writeInt32BE(1, at); // correlation_id
  at = request.writeInt16BE(clientId.length, at);
  at += clientId.copy(request, at);
  at = request.writeInt32BE(0, at);
  request.writeInt8(0, at);

  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => socket.write(request));
    let received = Buffer.alloc(0);
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error('metadata request timed out')));
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('connection closed before a full response')));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 4 || received.length < 4 + received.readInt32BE(0)) return;
      // Response: size, correlation_id (header v0), throttle_time_ms, brokers array length, …
      if (received.length < 16 || received.readInt32BE(4) !== 1) reject(new Error('unexpected metadata response'));
      else resolve(received.readInt32BE(12));
      socket.destroy();
    });
  });
}

/** Cassandra is ready when a CQL query succeeds (the native transport opens last in start-up). */
export async function cassandraReady(port: number, timeoutMs = 5000, host = '127.0.0.1'): Promise<boolean> {
  // A cheap TCP check first: no need to build a driver client while the port is still closed.
  if (!(await canConnect(port, 1000, host))) return false;
  const client = new cassandra.Client({
    contactPoints: [`${host}:${port}`],
    localDataCenter: 'datacenter1',
    isMetadataSyncEnabled: false, // only one query: skip fetching the schema
    // Ask this node, not a peer the driver finds through it (a cluster node is ready only when it answers itself).
    policies: { loadBalancing: new cassandra.policies.loadBalancing.AllowListPolicy(new cassandra.policies.loadBalancing.DCAwareRoundRobinPolicy('datacenter1'), [`${host}:${port}`]) },
    socketOptions: { connectTimeout: timeoutMs, readTimeout: timeoutMs },
  });
  try {
    await client.connect();
    const rs = await client.execute('SELECT release_version FROM system.local');
    return rs.rows.length === 1;
  } catch {
    return false;
  } finally {
    await client.shutdown().catch(() => undefined);
  }
}
