/**
 * The local stack: real Kafka and Cassandra servers fetched from Maven Central and run as detached
 * JVMs under one folder (default ./.stack of the working directory). Used by `exactlyonce stack …` and the integration tests.
 */
export { defaultStackOptions, cassandraStoragePort, SERVER_NAMES } from './options.js';
export type { CommitlogSync, ServerName, ServerStatus, StackOptions } from './options.js';
export { COMMITLOG_SYNCS } from './options.js';
export { stackCommitlogPeriodMs, stackCommitlogSync } from './cassandra-server.js';
export { isSecure, secureFiles, secureSummary } from './secure.js';
export { stackUp, stackDown, stackStatus, stackLogs, startServer, stopServer, killServer, logEnd, crashRecovery } from './stack.js';
