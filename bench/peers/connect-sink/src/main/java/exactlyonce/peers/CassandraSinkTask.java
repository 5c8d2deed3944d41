package exactlyonce.peers;

import com.datastax.oss.driver.api.core.ConsistencyLevel;
import com.datastax.oss.driver.api.core.CqlSession;
import com.datastax.oss.driver.api.core.CqlSessionBuilder;
import com.datastax.oss.driver.api.core.cql.BatchStatement;
import com.datastax.oss.driver.api.core.cql.BatchStatementBuilder;
import com.datastax.oss.driver.api.core.cql.BatchType;
import com.datastax.oss.driver.api.core.cql.BoundStatement;
import com.datastax.oss.driver.api.core.cql.Statement;
import com.datastax.oss.driver.api.core.cql.PreparedStatement;
import java.net.InetSocketAddress;
import java.time.Instant;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.errors.ConnectException;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;

/**
 * Per record: bind the prepared INSERT (partition, offset, and the event's five fields, read from the
 * java.util.Map that JsonConverter with schemas.enable=false makes of a JSON object) and executeAsync
 * it at LOCAL_QUORUM, at most max.in.flight at once (with cassandra.max.batch above 1, consecutive
 * records of one partition go as one UNLOGGED batch instead, as DataStax's connector batches by
 * partition key). flush() (which the default preCommit() calls
 * before Connect commits the offsets of the records put so far) waits until every write issued has
 * completed: at least once. A write that failed (after the driver's own retry policy) fails the task,
 * so no offset past it is ever committed.
 */
public final class CassandraSinkTask extends SinkTask {
  private CqlSession session;
  private PreparedStatement insert;
  private int maxInFlight;
  private int maxBatch;
  private Semaphore slots;
  private final AtomicReference<Throwable> failure = new AtomicReference<>();

  @Override
  public String version() {
    return "0.1.0";
  }

  @Override
  public void start(Map<String, String> props) {
    CassandraSinkConfig config = new CassandraSinkConfig(props);
    CqlSessionBuilder builder = CqlSession.builder().withLocalDatacenter(config.getString(CassandraSinkConfig.LOCAL_DC));
    for (String point : config.getList(CassandraSinkConfig.CONTACT_POINTS)) {
      int colon = point.lastIndexOf(':');
      String host = colon < 0 ? point : point.substring(0, colon);
      int port = colon < 0 ? 9042 : Integer.parseInt(point.substring(colon + 1));
      builder.addContactPoint(new InetSocketAddress(host, port));
    }
    session = builder.build();
    String table = config.getString(CassandraSinkConfig.KEYSPACE) + "." + config.getString(CassandraSinkConfig.TABLE);
    insert = session.prepare("INSERT INTO " + table + " (partition, offset, id, ts, source, client, health) VALUES (?,?,?,?,?,?,?)");
    maxInFlight = config.getInt(CassandraSinkConfig.MAX_IN_FLIGHT);
    maxBatch = config.getInt(CassandraSinkConfig.MAX_BATCH);
    slots = new Semaphore(maxInFlight);
  }

  @Override
  public void put(Collection<SinkRecord> records) {
    BatchStatementBuilder batch = null;
    int batchPartition = -1;
    for (SinkRecord record : records) {
      throwIfFailed();
      BoundStatement bound = bind(record);
      if (maxBatch == 1) {
        execute(bound);
        continue;
      }
      if (batch != null && (record.kafkaPartition() != batchPartition || batch.getStatementsCount() == maxBatch)) {
        execute(batch.build());
        batch = null;
      }
      if (batch == null) {
        batch = BatchStatement.builder(BatchType.UNLOGGED).setConsistencyLevel(ConsistencyLevel.LOCAL_QUORUM);
        batchPartition = record.kafkaPartition();
      }
      batch.addStatement(bound);
    }
    if (batch != null) execute(batch.build());
  }

  private BoundStatement bind(SinkRecord record) {
    if (!(record.value() instanceof Map<?, ?> event)) {
      throw new ConnectException("record " + record.topic() + "/" + record.kafkaPartition() + "@" + record.kafkaOffset()
          + " is not a JSON object (converter: JsonConverter with schemas.enable=false)");
    }
    return insert.bind(
            record.kafkaPartition(),
            record.kafkaOffset(),
            ((Number) event.get("id")).longValue(),
            Instant.ofEpochMilli(((Number) event.get("ts")).longValue()),
            (String) event.get("source"),
            (String) event.get("client"),
            ((Number) event.get("health")).intValue())
        .setConsistencyLevel(ConsistencyLevel.LOCAL_QUORUM);
  }

  /** Issues one request once a slot is free; its completion frees the slot (and records a failure). */
  private void execute(Statement<?> statement) {
    slots.acquireUninterruptibly();
    session.executeAsync(statement).whenComplete((rs, error) -> {
      if (error != null) failure.compareAndSet(null, error);
      slots.release();
    });
  }

  /** Waits until every write issued so far has completed (all slots free again). */
  @Override
  public void flush(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
    slots.acquireUninterruptibly(maxInFlight);
    slots.release(maxInFlight);
    throwIfFailed();
  }

  private void throwIfFailed() {
    Throwable error = failure.get();
    if (error != null) throw new ConnectException("a Cassandra write failed", error);
  }

  @Override
  public void stop() {
    if (session != null) {
      // Let writes in flight finish, so a stopped task leaves nothing half-issued behind.
      try {
        slots.tryAcquire(maxInFlight, 30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      session.close();
    }
  }
}
