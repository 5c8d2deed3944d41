package exactlyonce.peers;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.sink.SinkConnector;

/**
 * A Cassandra sink built the way DataStax's Kafka connector writes: one prepared INSERT bound and
 * executed per record with the DataStax Java driver 4.x, asynchronously with a bound on the writes in
 * flight, at least once (Connect commits a record's offset only after its write completed). The
 * peer of bench/peers/run.ts (issue 38); each task gets the same settings.
 */
public final class CassandraSinkConnector extends SinkConnector {
  private Map<String, String> props;

  @Override
  public void start(Map<String, String> props) {
    new CassandraSinkConfig(props); // fails the connector at once on a bad setting
    this.props = new HashMap<>(props);
  }

  @Override
  public Class<? extends Task> taskClass() {
    return CassandraSinkTask.class;
  }

  @Override
  public List<Map<String, String>> taskConfigs(int maxTasks) {
    List<Map<String, String>> configs = new ArrayList<>();
    for (int i = 0; i < maxTasks; i++) configs.add(new HashMap<>(props));
    return configs;
  }

  @Override
  public void stop() {}

  @Override
  public ConfigDef config() {
    return CassandraSinkConfig.DEF;
  }

  @Override
  public String version() {
    return "0.1.0";
  }
}
