// Prints the partition the Java producer picks for each key, with Kafka's own code:
//   java -cp '<kafka lib>/*' PartitionOracle.java <partitions> <key>...
// One line per key: "<key>\t<partition>".
import java.nio.charset.StandardCharsets;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;

public class PartitionOracle {
    public static void main(String[] args) {
        int partitions = Integer.parseInt(args[0]);
        for (int i = 1; i < args.length; i++) {
            byte[] key = args[i].getBytes(StandardCharsets.UTF_8);
            System.out.println(args[i] + "\t" + BuiltInPartitioner.partitionForKey(key, partitions));
        }
    }
}
