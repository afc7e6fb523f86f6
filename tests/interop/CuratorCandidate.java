// CuratorCandidate: one Curator LeaderLatch participant, for the mixed-election
// tests (tests/integration/test_mixed.py). Single-file source launch (JDK 11+):
//
//   java -cp <curator + zookeeper jars> CuratorCandidate.java HOSTPORT PATH ID [SESSION_MS]
//
// Prints one JSON line per event on stdout and flushes it:
//   {"event":"started","id":...,"node":...}     the latch is started, our node is known
//   {"event":"leader","id":...,"node":...,"t":MONO_NS,"leader":ID,"participants":[ID...]}
//   {"event":"follower","id":...,"node":...,"t":MONO_NS}   (notLeader: after leading)
//   {"event":"stepdown","id":...,"t":MONO_NS}   on SIGTERM while leading, before close()
//   {"event":"stopped","id":...}
// "t" is System.nanoTime() (CLOCK_MONOTONIC on Linux, shared with the other
// processes of the host). On SIGTERM the latch is closed with
// CloseMode.NOTIFY_LEADER (notLeader is called, then our node is deleted) and
// the process exits 0. LeaderLatch.close() deletes the node first and calls
// notLeader() after, so a successor may report before our "follower" line: a
// leader that must not overlap stops its duty (here: "stepdown") before close().
import java.util.concurrent.CountDownLatch;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorCandidate {
    static synchronized void emit(String event, String id, String node, String extra) {
        StringBuilder b = new StringBuilder();
        b.append("{\"event\":\"").append(event).append("\",\"id\":\"").append(id).append('"');
        if (node != null)
            b.append(",\"node\":\"").append(node).append('"');
        b.append(",\"t\":").append(System.nanoTime());
        if (extra != null)
            b.append(',').append(extra);
        b.append('}');
        System.out.println(b);
        System.out.flush();
    }

    static String nodeOf(LeaderLatch latch) {
        String p = latch.getOurPath();
        return p == null ? null : p.substring(p.lastIndexOf('/') + 1);
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: CuratorCandidate HOSTPORT PATH ID [SESSION_MS]");
            System.exit(64);
        }
        String hosts = args[0], path = args[1], id = args[2];
        int sessionMs = args.length > 3 ? Integer.parseInt(args[3]) : 2000;
        CuratorFramework client = CuratorFrameworkFactory.builder()
            .connectString(hosts).sessionTimeoutMs(sessionMs).connectionTimeoutMs(5000)
            .retryPolicy(new ExponentialBackoffRetry(50, 5)).build();
        LeaderLatch latch = new LeaderLatch(client, path, id, LeaderLatch.CloseMode.NOTIFY_LEADER);
        latch.addListener(new LeaderLatchListener() {
            public void isLeader() {
                // Curator's own view: the leader's id and the participants in
                // its order, read from the nodes' data (informational only)
                StringBuilder v = new StringBuilder("\"leader\":");
                try {
                    v.append('"').append(latch.getLeader().getId()).append("\",\"participants\":[");
                    String sep = "";
                    for (Participant p : latch.getParticipants()) {
                        v.append(sep).append('"').append(p.getId()).append('"');
                        sep = ",";
                    }
                    v.append(']');
                } catch (Exception e) {
                    v.setLength(0);
                    v.append("\"leader\":null");
                }
                emit("leader", id, nodeOf(latch), v.toString());
            }
            public void notLeader() {
                emit("follower", id, nodeOf(latch), null);
            }
        });
        // SIGTERM/SIGINT: leave cleanly and exit 0 (a shutdown hook would exit 143)
        CountDownLatch done = new CountDownLatch(1);
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), sig -> done.countDown());
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), sig -> done.countDown());
        client.start();
        latch.start();
        // report our node once the background create has finished
        for (int i = 0; i < 1000 && latch.getOurPath() == null; i++)
            Thread.sleep(10);
        emit("started", id, nodeOf(latch), null);
        done.await();
        if (latch.hasLeadership())
            emit("stepdown", id, nodeOf(latch), null);
        try {
            latch.close();          // NOTIFY_LEADER: deletes our node, then notLeader()
        } catch (Exception e) {
            System.err.println("close: " + e);
        }
        client.close();
        emit("stopped", id, null, null);
        System.exit(0);
    }
}
