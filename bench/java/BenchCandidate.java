// BenchCandidate: the foreign Java candidates of the benchmark (bench/foreign.md).
//
//   BenchCandidate MODE HOSTPORT PATH SESSION_MS COUNT
//     MODE: latch    Apache Curator LeaderLatch
//           selector Apache Curator LeaderSelector
//           les      ZooKeeper recipe LeaderElectionSupport
//
// Build once, run from the build directory (the source launch `java File.java`
// compiles on every start and is slow):
//
//   CP=$(cat bench/java/classpath.txt)
//   javac -d OUTDIR -cp $CP bench/java/BenchCandidate.java
//   java -cp OUTDIR:$CP BenchCandidate latch 127.0.0.1:2181 /bench/e 2000 1
//
// Classpath (Debian 12 packages, the same line as bench/java/classpath.txt):
//   /usr/share/java/curator-recipes.jar      libcurator-recipes-java 5.4.0
//   /usr/share/java/curator-framework.jar    libcurator-framework-java 5.4.0
//   /usr/share/java/curator-client.jar       libcurator-client-java 5.4.0
//   /usr/share/java/zookeeper.jar            libzookeeper-java 3.8.0
//   /usr/share/java/zookeeper-jute.jar       libzookeeper-java 3.8.0
//   /usr/share/java/zookeeper-recipes-election.jar  libzookeeper-java 3.8.0
//   /usr/share/java/slf4j-api.jar            libslf4j-java 1.7.32
//   /usr/share/java/slf4j-nop.jar            (silences every library log)
//   /usr/share/java/guava.jar                libguava-java 31.1 (Curator needs it)
//
// The process hosts COUNT candidates ("slots" 0..COUNT-1), each with its own
// client and ZooKeeper session, started in slot order. stdout: one line per
// event, written in one write() call: "<mono_us> <slot> <event>[ <detail>]"
// with mono_us = System.nanoTime()/1000 (CLOCK_MONOTONIC on Linux). Events:
// leader, follower (les only), node <name>, stopped, error <text>, and once
// "<mono_us> -1 ready" when all COUNT slots are started. stdin: "stop <slot>",
// "add", "quit" (EOF = quit). SIGTERM = quit (exit 0); SIGINT/SIGHUP run the
// same graceful stop from the shutdown hook.
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.recipes.leader.LeaderElectionSupport;
import org.apache.zookeeper.recipes.leader.LeaderOffer;

public class BenchCandidate {
    static String mode, hostport, path;
    static int sessionMs;
    static final long PID = ProcessHandle.current().pid();

    // ---- output: one write() per line -------------------------------------
    static final FileOutputStream OUT = new FileOutputStream(FileDescriptor.out);

    static long now() {
        return System.nanoTime() / 1000;
    }

    static synchronized void emit(long us, int slot, String event) {
        byte[] b = (us + " " + slot + " " + event + "\n").getBytes(StandardCharsets.UTF_8);
        try {
            OUT.write(b);
        } catch (IOException e) {
            // stdout gone: nothing to tell anyone
        }
    }

    static void error(int slot, String text) {
        emit(now(), slot, "error " + text.replaceAll("[\\r\\n]+", " "));
    }

    static String describe(Throwable e) {
        return e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
    }

    // node data / id of a candidate: the same shape for every library
    static String ident(int slot) {
        return PID + "-" + slot;
    }

    static String lastComponent(String p) {
        return p.substring(p.lastIndexOf('/') + 1);
    }

    // ---- a candidate -------------------------------------------------------
    abstract static class Slot {
        final int idx;
        volatile boolean stopping;   // set before the recipe is closed: mutes state errors
        private boolean stopped;
        final CountDownLatch done = new CountDownLatch(1);   // "stopped" printed

        Slot(int idx) {
            this.idx = idx;
        }

        abstract void start() throws Exception;

        abstract void closeRecipe() throws Exception;   // leave the election: our node is deleted

        abstract void closeClient() throws Exception;   // then close the session

        String ourPath() {                              // for the node poller; null = not known yet
            return null;
        }

        // graceful stop, first half; false if this slot's stop was already begun
        final synchronized boolean stopRecipe() {
            if (stopped)
                return false;
            stopped = true;
            stopping = true;
            try {
                closeRecipe();
            } catch (Exception e) {
                error(idx, "stop: " + describe(e));
            }
            return true;
        }

        // second half: close the session. The ZooKeeper 3.8 Java client's
        // close() sleeps 100 ms in ClientCnxnSocketNIO.cleanup() while holding
        // the monitor of a ZooKeeper.States enum constant, which every client
        // of the JVM locks to send a request: closes in one JVM take 100 ms
        // each one after the other, and stall the other clients meanwhile
        final void stopClient() {
            try {
                closeClient();
            } catch (Exception e) {
                error(idx, "stop: " + describe(e));
            }
            emit(now(), idx, "stopped");
            done.countDown();
        }

        final boolean stop() {
            if (!stopRecipe())
                return false;
            stopClient();
            return true;
        }
    }

    static CuratorFramework newCurator(Slot slot) {
        CuratorFramework c = CuratorFrameworkFactory.builder()
            .connectString(hostport)
            .sessionTimeoutMs(sessionMs)
            .connectionTimeoutMs(15000)
            .retryPolicy(new ExponentialBackoffRetry(100, 3))
            .build();
        c.getUnhandledErrorListenable().addListener(
            (msg, e) -> error(slot.idx, "unhandled " + msg + (e == null ? "" : " " + describe(e))));
        c.getConnectionStateListenable().addListener((client, state) -> {
            if (!slot.stopping && state != ConnectionState.CONNECTED && state != ConnectionState.RECONNECTED)
                error(slot.idx, "connection " + state);
        });
        return c;
    }

    // A pool starts its slots one after the other, each connected before the
    // next one starts (like kazoo's start() and LeaderElectionSupport's
    // start()): 200 sessions opened at once by one JVM miss their pings on a
    // busy host
    static void connected(CuratorFramework client, Slot slot) throws InterruptedException {
        if (!client.blockUntilConnected(15, TimeUnit.SECONDS))
            error(slot.idx, "start: not connected after 15 s");
    }

    // Curator LeaderLatch: leader = isLeader(); node = getOurPath() (polled)
    static final class LatchSlot extends Slot {
        CuratorFramework client;
        LeaderLatch latch;

        LatchSlot(int idx) {
            super(idx);
        }

        void start() throws Exception {
            client = newCurator(this);
            latch = new LeaderLatch(client, path, ident(idx));
            latch.addListener(new LeaderLatchListener() {
                public void isLeader() {
                    long t = now();
                    emit(t, idx, "leader");
                }

                public void notLeader() {
                }
            });
            client.start();
            latch.start();
            poller.watch(this);
            connected(client, this);
        }

        String ourPath() {
            return latch.getOurPath();
        }

        void closeRecipe() throws Exception {
            latch.close();       // deletes our node in the background (guaranteed delete)
        }

        void closeClient() {
            client.close();      // closes the session: the node is gone when this returns
        }
    }

    // Curator LeaderSelector: leader = takeLeadership(), which blocks until
    // stop; autoRequeue() as the Curator docs advise (LeaderSelectorListenerAdapter
    // cancels leadership, and a queued acquire, on SUSPENDED/LOST: without
    // requeue the slot would leave the election for good)
    static final class SelectorSlot extends Slot {
        CuratorFramework client;
        LeaderSelector selector;
        ExecutorService exec;
        final CountDownLatch release = new CountDownLatch(1);

        SelectorSlot(int idx) {
            super(idx);
        }

        void start() throws Exception {
            client = newCurator(this);
            // the selector's own thread (what LeaderSelector makes by default),
            // but ours so that stop can wait until the lock node is released
            exec = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "LeaderSelector-" + idx);
                t.setDaemon(true);
                return t;
            });
            selector = new LeaderSelector(client, path, exec, new LeaderSelectorListenerAdapter() {
                public void takeLeadership(CuratorFramework c) throws Exception {
                    long t = now();
                    emit(t, idx, "leader");
                    release.await();   // lead until stopped: close() interrupts this
                }
            });
            selector.setId(ident(idx));
            selector.autoRequeue();
            client.start();
            selector.start();
            connected(client, this);
        }

        void closeRecipe() throws Exception {
            // close() first (no requeue after it), which interrupts the
            // selector's thread: takeLeadership returns (InterruptedException)
            // and the lock node is deleted, or a queued acquire() gives up and
            // deletes its node
            selector.close();
            release.countDown();
            exec.shutdown();       // wait until the selector's task is over: node deleted
            if (!exec.awaitTermination(15, TimeUnit.SECONDS))
                error(idx, "stop: LeaderSelector thread did not finish in 15 s");
        }

        void closeClient() {
            client.close();
        }
    }

    // ZooKeeper recipe LeaderElectionSupport: leader = ELECTED_COMPLETE,
    // follower = READY_COMPLETE, node = the LeaderOffer's node at OFFER_COMPLETE
    static final Field OFFER_FIELD;

    static {
        Field f = null;
        try {
            f = LeaderElectionSupport.class.getDeclaredField("leaderOffer");
            f.setAccessible(true);
        } catch (Exception e) {
            // no node lines then
        }
        OFFER_FIELD = f;
    }

    static boolean pathEnsured;   // only touched by lesStarter
    static final ExecutorService lesStarter = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "les-starter");
        t.setDaemon(true);
        return t;
    });

    static void ensurePath(ZooKeeper zk) throws Exception {
        // LeaderElectionSupport assumes its root node exists: create it and its parents
        for (int i = path.indexOf('/', 1); i != -1; i = path.indexOf('/', i + 1))
            createIfMissing(zk, path.substring(0, i));
        createIfMissing(zk, path);
    }

    static void createIfMissing(ZooKeeper zk, String p) throws Exception {
        try {
            zk.create(p, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
        } catch (KeeperException.NodeExistsException e) {
            // another candidate made it
        }
    }

    static final class LesSlot extends Slot {
        ZooKeeper zk;
        LeaderElectionSupport les;

        LesSlot(int idx) {
            super(idx);
        }

        void start() throws Exception {
            zk = new ZooKeeper(hostport, sessionMs, event -> {
                Watcher.Event.KeeperState s = event.getState();
                if (!stopping && event.getType() == Watcher.Event.EventType.None
                        && s != Watcher.Event.KeeperState.SyncConnected && s != Watcher.Event.KeeperState.Closed)
                    error(idx, "connection " + s);
            });
            les = new LeaderElectionSupport();
            les.setZooKeeper(zk);
            les.setRootNodeName(path);
            les.setHostName(ident(idx));
            les.addListener(type -> {
                long t = now();
                switch (type) {
                case ELECTED_COMPLETE:
                    emit(t, idx, "leader");
                    break;
                case READY_COMPLETE:
                    emit(t, idx, "follower");
                    break;
                case OFFER_COMPLETE:
                    String node = offerNode();
                    if (node != null)
                        emit(t, idx, "node " + node);
                    break;
                case FAILED:
                    if (!stopping)
                        error(idx, "LeaderElectionSupport FAILED (the exception is in its log only)");
                    break;
                default:
                    break;
                }
            });
            // start() is synchronous: it waits for the connection, creates
            // the offer, then reads every offer (getChildren, then getData of
            // each one) to determine the status. The start()s run in slot
            // order on one thread (offers created in slot order, no pile-up of
            // concurrent determinations); the next slot's client is made, and
            // connects, as soon as that thread has taken this slot
            CountDownLatch begun = new CountDownLatch(1);
            lesStarter.execute(() -> {
                begun.countDown();
                synchronized (this) {   // a stop of this slot waits until start() is over
                    if (stopping)
                        return;
                    if (!pathEnsured) {
                        try {
                            ensurePath(zk);
                        } catch (Exception e) {
                            error(idx, "creating " + path + ": " + describe(e));
                        }
                        pathEnsured = true;
                    }
                    les.start();
                }
            });
            begun.await();
        }

        String offerNode() {
            try {
                LeaderOffer o = (LeaderOffer) OFFER_FIELD.get(les);
                return o == null ? null : lastComponent(o.getNodePath());
            } catch (Exception e) {
                return null;
            }
        }

        void closeRecipe() {
            les.stop();    // deletes the offer (synchronously)
        }

        void closeClient() throws Exception {
            zk.close();
        }
    }

    // ---- the node poller (latch): one thread, every 2 ms, only while some slot's node is unknown
    static final class NodePoller extends Thread {
        private final List<Slot> pending = new ArrayList<>();

        NodePoller() {
            super("node-poller");
            setDaemon(true);
        }

        synchronized void watch(Slot s) {
            pending.add(s);
            notifyAll();
        }

        public void run() {
            try {
                for (;;) {
                    List<Slot> snap;
                    synchronized (this) {
                        while (pending.isEmpty())
                            wait();
                        snap = new ArrayList<>(pending);
                    }
                    for (Slot s : snap) {
                        String p = s.stopping ? null : s.ourPath();
                        if (p != null)
                            emit(now(), s.idx, "node " + lastComponent(p));
                        if (p != null || s.stopping) {
                            synchronized (this) {
                                pending.remove(s);
                            }
                        }
                    }
                    Thread.sleep(2);
                }
            } catch (InterruptedException e) {
                // exit
            }
        }
    }

    static final NodePoller poller = new NodePoller();

    // ---- the slots ---------------------------------------------------------
    static final List<Slot> slots = new ArrayList<>();
    static boolean closing;

    static void addSlot() {
        Slot s;
        synchronized (slots) {
            if (closing)
                return;
            int idx = slots.size();
            switch (mode) {
            case "latch":
                s = new LatchSlot(idx);
                break;
            case "selector":
                s = new SelectorSlot(idx);
                break;
            default:
                s = new LesSlot(idx);
                break;
            }
            slots.add(s);
        }
        synchronized (s) {   // a stop (shutdown hook) waits until the start is over
            try {
                s.start();
            } catch (Exception e) {
                error(s.idx, "start: " + describe(e));
            }
        }
    }

    static Slot slot(int idx) {
        synchronized (slots) {
            return idx >= 0 && idx < slots.size() ? slots.get(idx) : null;
        }
    }

    // quit / EOF / SIGTERM / shutdown hook: first leave the election with
    // every slot, the newest first (the back of the queue first: no hand-over
    // of leadership inside the process), then close the clients (see
    // stopClient: about 100 ms each in a JVM, whatever the parallelism)
    static final ScheduledExecutorService closer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "deferred-close");
        t.setDaemon(true);
        return t;
    });

    static void stopAll() {
        List<Slot> snap;
        List<Slot> mine = new ArrayList<>();
        synchronized (slots) {
            closing = true;
            snap = new ArrayList<>(slots);
        }
        for (int i = snap.size() - 1; i >= 0; i--) {
            Slot s = snap.get(i);
            if (s.stopRecipe())        // false: being stopped by a "stop" command
                mine.add(s);
        }
        for (Slot s : mine)
            s.stopClient();
        try {
            for (Slot s : snap)
                s.done.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            // exit anyway
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5 || !args[0].matches("latch|selector|les")) {
            System.err.println("usage: BenchCandidate latch|selector|les HOSTPORT PATH SESSION_MS COUNT");
            System.exit(64);
        }
        mode = args[0];
        hostport = args[1];
        path = args[2];
        sessionMs = Integer.parseInt(args[3]);
        int count = Integer.parseInt(args[4]);

        Thread.setDefaultUncaughtExceptionHandler((t, e) -> error(-1, "uncaught in " + t.getName() + ": " + describe(e)));
        // SIGTERM: exit 0 through the shutdown hook, which stops every slot
        // gracefully (SIGINT/SIGHUP take the same hook with their usual status)
        sun.misc.Signal.handle(new sun.misc.Signal("TERM"), sig -> System.exit(0));
        Runtime.getRuntime().addShutdownHook(new Thread(BenchCandidate::stopAll, "graceful-stop"));
        poller.start();

        for (int i = 0; i < count; i++)
            addSlot();
        emit(now(), -1, "ready");

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w[0].equals("quit"))
                break;
            if (w[0].equals("add") && w.length == 1) {
                addSlot();
            } else if (w[0].equals("stop") && w.length == 2 && w[1].matches("\\d{1,9}")) {
                int idx = Integer.parseInt(w[1]);
                Slot s = slot(idx);
                if (s == null)
                    error(idx, "stop: no such slot");
                else if (s.stopRecipe())
                    // the node is deleted now; the session is closed a second
                    // later, so the 100 ms JVM-wide stall of a close (see
                    // stopClient) cannot delay a successor in this process
                    closer.schedule(s::stopClient, 1, TimeUnit.SECONDS);
                else
                    error(idx, "stop: already stopped");
            } else if (!w[0].isEmpty()) {
                error(-1, "unknown command: " + line);
            }
        }
        stopAll();
        System.exit(0);
    }
}
