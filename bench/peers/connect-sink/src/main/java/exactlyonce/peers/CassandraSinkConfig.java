package exactlyonce.peers;

import java.util.Map;
import org.apache.kafka.common.config.AbstractConfig;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigDef.Importance;
import org.apache.kafka.common.config.ConfigDef.Range;
import org.apache.kafka.common.config.ConfigDef.Type;

/** The sink's settings (the connector's properties file, e.g. bench/peers/run.ts writes sink.properties). */
public final class CassandraSinkConfig extends AbstractConfig {
  public static final String CONTACT_POINTS = "cassandra.contact.points";
  public static final String LOCAL_DC = "cassandra.local.datacenter";
  public static final String KEYSPACE = "cassandra.keyspace";
  public static final String TABLE = "cassandra.table";
  public static final String MAX_IN_FLIGHT = "cassandra.max.in.flight";
  public static final String MAX_BATCH = "cassandra.max.batch";

  public static final ConfigDef DEF = new ConfigDef()
      .define(CONTACT_POINTS, Type.LIST, "127.0.0.1:9042", Importance.HIGH,
          "Cassandra contact points, host:port[,host:port…]")
      .define(LOCAL_DC, Type.STRING, "datacenter1", Importance.HIGH, "the driver's local data centre")
      .define(KEYSPACE, Type.STRING, Importance.HIGH, "keyspace of the table")
      .define(TABLE, Type.STRING, Importance.HIGH,
          "table (partition int, offset bigint, id bigint, ts timestamp, source text, client text, health int)")
      .define(MAX_IN_FLIGHT, Type.INT, 64, Range.between(1, 100_000), Importance.MEDIUM,
          "most requests executing at once per task (executeAsync; put() waits for a slot)")
      .define(MAX_BATCH, Type.INT, 1, Range.between(1, 1000), Importance.MEDIUM,
          "1 (the default): one INSERT request per record. More: consecutive records of one Kafka partition (one"
              + " Cassandra partition here) go as one UNLOGGED batch of up to this many INSERTs, as DataStax's"
              + " connector groups records by partition key (its maxNumberOfRecordsInBatch, default 32)");

  public CassandraSinkConfig(Map<String, String> props) {
    super(DEF, props);
  }
}
