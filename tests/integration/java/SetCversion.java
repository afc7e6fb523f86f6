// SetCversion: rewrites a stopped standalone ZooKeeper 3.8 server's dataDir so
// that one node's child counter (the StatPersisted cversion, from which the
// server makes its children's sequence suffixes) has a given value: the
// snapshot and transaction log are restored into a DataTree, the node's
// counter is set, and a new snapshot is saved at the same zxid (the newest
// one, so the server loads it). 2^31 real creates are out of a test's reach.
//
//   java -Dzookeeper.digest.enabled=false -cp <classes>:zookeeper.jar:zookeeper-jute.jar:slf4j-api.jar:slf4j-nop.jar \
//       SetCversion DATADIR PATH CVERSION
//
// The digest is off: the counter is set behind the tree's back (no
// preChange/postChange), so a digest saved with the snapshot would not match
// the tree the server loads.
import java.io.File;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public final class SetCversion {
    private SetCversion() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: SetCversion DATADIR PATH CVERSION");
            System.exit(2);
        }
        File dir = new File(args[0]);
        int cversion = Integer.parseInt(args[2]);
        FileTxnSnapLog log = new FileTxnSnapLog(dir, dir);
        DataTree tree = new DataTree();
        ConcurrentHashMap<Long, Integer> sessions = new ConcurrentHashMap<>();
        log.restore(tree, sessions, (hdr, rec, digest) -> { });
        DataNode node = tree.getNode(args[1]);
        if (node == null) {
            System.err.println("SetCversion: no node " + args[1]);
            System.exit(1);
        }
        synchronized (node) {
            node.stat.setCversion(cversion);
        }
        log.save(tree, sessions, false);
        log.close();
        System.out.println("cversion " + cversion + " zxid 0x" + Long.toHexString(tree.lastProcessedZxid));
    }
}
