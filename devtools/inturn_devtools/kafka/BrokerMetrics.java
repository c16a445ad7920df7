// The broker's own request and topic counters over JMX on loopback, for the pipeline benchmark.
// Run as a single-file program: java BrokerMetrics.java <jmx port>. Each line read from stdin asks for one
// snapshot; each snapshot is written as one line of tab-separated "<object name>\t<Count>" pairs joined by
// "\u0001" (no JSON library on the broker's class path): the Count of every RequestsPerSec meter of
// kafka.network and every BrokerTopicMetrics meter of kafka.server.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Set;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class BrokerMetrics {
    public static void main(String[] args) throws Exception {
        String url = "service:jmx:rmi:///jndi/rmi://127.0.0.1:" + args[0] + "/jmxrmi";
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(url))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            String[] patterns = {
                "kafka.network:type=RequestMetrics,name=RequestsPerSec,*",
                "kafka.server:type=BrokerTopicMetrics,*",
            };
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            while (in.readLine() != null) {
                StringBuilder out = new StringBuilder();
                for (String pattern : patterns) {
                    Set<ObjectName> names = server.queryNames(new ObjectName(pattern), null);
                    for (ObjectName name : names) {
                        Object count;
                        try {
                            count = server.getAttribute(name, "Count");
                        } catch (Exception e) {
                            continue; // not a meter
                        }
                        if (out.length() > 0) {
                            out.append('\u0001');
                        }
                        out.append(name.getCanonicalName()).append('\t').append(count);
                    }
                }
                System.out.println(out);
                System.out.flush();
            }
        }
    }
}
