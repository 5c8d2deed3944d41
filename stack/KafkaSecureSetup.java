/*
 * `exactlyonce stack up --secure`, run by src/stack/secure.ts with the JDK's single-file source
 * launcher against the broker's own jars. Passwords come from the environment
 * (EO_KAFKA_ADMIN_PASSWORD, EO_KAFKA_WORKER_PASSWORD), never from a command line:
 *
 *   format <cluster id> <server.properties> <admin user> <worker user>
 *     formats the KRaft storage with both SCRAM-SHA-512 users (kafka-storage format --add-scram, run
 *     in this process so the passwords stay off argv);
 *   acls <broker host:port> <CA PEM file> <admin user> <worker user> <worker prefix> <timeout ms>
 *     logs in to the broker's SASL_SSL listener as the admin (a super user) once it accepts logins,
 *     and creates the worker's ACLs.
 */
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

public class KafkaSecureSetup {
  public static void main(String[] args) throws Exception {
    String adminPassword = System.getenv("EO_KAFKA_ADMIN_PASSWORD"), workerPassword = System.getenv("EO_KAFKA_WORKER_PASSWORD");
    if (args[0].equals("format")) {
      kafka.tools.StorageTool.main(new String[] {
        "format", "-t", args[1], "-c", args[2],
        "--add-scram", "SCRAM-SHA-512=[name=" + args[3] + ",password=" + adminPassword + "]",
        "--add-scram", "SCRAM-SHA-512=[name=" + args[4] + ",password=" + workerPassword + "]",
      });
      return;
    }
    String broker = args[1], ca = args[2], adminUser = args[3], workerUser = args[4], prefix = args[5];
    long deadline = System.currentTimeMillis() + Long.parseLong(args[6]);

    String worker = "User:" + workerUser;
    List<AclBinding> acls = new ArrayList<>();
    // The worker reads its input topic, writes the alerts topic, looks both up, and joins its group.
    for (AclOperation op : List.of(AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)) {
      acls.add(allow(ResourceType.TOPIC, prefix, PatternType.PREFIXED, worker, op));
    }
    acls.add(allow(ResourceType.GROUP, prefix, PatternType.PREFIXED, worker, AclOperation.READ));
    acls.add(allow(ResourceType.GROUP, "EventStreamingApp", PatternType.LITERAL, worker, AclOperation.READ));

    Properties b = new Properties();
    b.put("bootstrap.servers", broker);
    b.put("security.protocol", "SASL_SSL");
    b.put("sasl.mechanism", "SCRAM-SHA-512");
    b.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"" + adminUser + "\" password=\"" + adminPassword + "\";");
    b.put("ssl.truststore.type", "PEM");
    b.put("ssl.truststore.location", ca);
    b.put("request.timeout.ms", "15000");
    b.put("default.api.timeout.ms", "15000");
    try (Admin a = Admin.create(b)) {
      for (;;) {
        try {
          if (a.describeCluster().nodes().get().isEmpty()) throw new RetriableException("no broker registered yet") {};
          a.createAcls(acls).all().get();
          break;
        } catch (Exception e) {
          Throwable cause = e.getCause() == null ? e : e.getCause();
          // Only "not yet" is waited for; a refusal (wrong password, unsupported) ends the set-up at once.
          if (!(cause instanceof RetriableException) || System.currentTimeMillis() > deadline) throw e;
          System.err.println("waiting: " + cause);
          Thread.sleep(500);
        }
      }
    }
    System.out.println("kafka secure set-up done");
  }

  static AclBinding allow(ResourceType type, String name, PatternType pattern, String principal, AclOperation op) {
    return new AclBinding(new ResourcePattern(type, name, pattern), new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW));
  }
}
