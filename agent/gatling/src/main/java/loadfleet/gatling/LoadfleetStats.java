package loadfleet.gatling;

import static io.gatling.javaapi.core.CoreDsl.exec;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.gatling.http.response.Response;
import io.gatling.javaapi.core.ChainBuilder;
import io.gatling.javaapi.core.Session;
import io.gatling.javaapi.http.HttpRequestActionBuilder;
import io.netty.handler.codec.http.HttpHeaders;
import java.nio.charset.StandardCharsets;
import java.util.AbstractMap;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The loadfleet hook for Gatling simulations: records every request's outcome and latency per
 * (target, request) and prints loadfleet EngineEvents on stdout, one line each:
 * {@code ##loadfleet <EngineEvent in protobuf's JSON mapping>} (ready, one interval per
 * wall-clock-aligned interval, the final interval, finished). Other stdout lines are Gatling's.
 *
 * <p>In a simulation, two lines:
 *
 * <pre>
 *   LoadfleetStats lf = LoadfleetStats.fromSystemProperties();      // once
 *   exec(lf.timed("http://host:8080", "home", http("home").get("/"))) // per request
 * </pre>
 *
 * and {@code lf.ready()} in {@code before()}, {@code lf.finish()} in {@code after()};
 * {@code setUp(LoadfleetStats.share().populate(scenario))} injects the plan's share of the load.
 *
 * <p>Latency runs from just before Gatling's request action to the end of its response
 * processing, in microseconds (System.nanoTime), so it includes connecting when Gatling had to.
 * Bytes are reconstructed from the parsed response (status line, headers, body) and the request
 * as Gatling built it; connection counts are not available from Gatling and stay 0.
 *
 * <p>Under the agent, {@link Launcher} reads commands from stdin: {@code stop} ends load through
 * {@link #stopGracefully} (in-flight requests finish, the partial interval is reported).
 */
public final class LoadfleetStats {
  public static final String PREFIX = "##loadfleet ";
  public static final String VERSION = "loadfleet-gatling 0.1.0 (Gatling 3.15.1)";
  // Time given to the ticker after an interval ends, for requests that ended just before it.
  private static final long TICK_GRACE_MS = 20;
  // The load's last interval waits this long after the end for the requests in flight then
  // (unless the simulation ends first); well inside the controller's revision window (2.5 s+).
  private static final long END_GRACE_MS = 1000;
  private static final String T0 = "loadfleet.t0";
  /**
   * Open model: the System.nanoTime at which the request fell due. When a session carries it,
   * latency counts from then (coordinated omission corrected) and the send lag is recorded.
   */
  public static final String DUE_NS = "loadfleet.due_ns";
  /** After a journey request: what its user does next, a {@link Judge.Then} name. */
  static final String THEN = "loadfleet.then";

  private final IntervalRecorder recorder;
  private final long endAtMs;
  private final long drainTimeoutMs;
  // Rows keyed by the Gatling scenario of the user (JobSimulation's scenarios are the job's);
  // otherwise "": a simulation's own scenario names are not the plan's.
  private final boolean byScenario;
  private final AtomicLong inFlight = new AtomicLong();
  // The response of a user's measured request, from Gatling's response processing to the action
  // after it, which records it with its verdict. At most one entry per user (one request of a
  // user is in flight at a time), removed by that action.
  private final ConcurrentHashMap<Long, IntervalRecorder.Answer> answers = new ConcurrentHashMap<>();
  // A journey response's status, headers and body, kept the same way until it is judged.
  private final ConcurrentHashMap<Long, Judge.Seen> seen = new ConcurrentHashMap<>();
  private final ScheduledExecutorService ticker = Executors.newSingleThreadScheduledExecutor(r -> {
    Thread t = new Thread(r, "loadfleet-ticker");
    t.setDaemon(true);
    return t;
  });
  // The hook of this JVM once its simulation is ready, for the Launcher's `stop` command.
  private static final AtomicReference<LoadfleetStats> ACTIVE = new AtomicReference<>();
  private volatile boolean stopping;
  private long nextToEmit;
  private boolean finished;

  public LoadfleetStats(long startAtMs, int intervalMs, long endAtMs, long drainTimeoutMs) {
    this(startAtMs, intervalMs, endAtMs, drainTimeoutMs, false);
  }

  /**
   * With {@code byScenario}, each row counts under its user's Gatling scenario
   * ({@code session.scenario()}) and its stats line says so ({@code scenario}): JobSimulation names
   * its populations as the job's scenarios.
   */
  LoadfleetStats(long startAtMs, int intervalMs, long endAtMs, long drainTimeoutMs, boolean byScenario) {
    this.recorder = new IntervalRecorder(startAtMs, intervalMs, endAtMs);
    this.endAtMs = endAtMs;
    this.drainTimeoutMs = drainTimeoutMs;
    this.byScenario = byScenario;
    ErrorCapture.install();
  }

  /**
   * The hook configured by {@code -Dloadfleet.start_at_ms} (default: the next second),
   * {@code -Dloadfleet.duration_ms}, {@code -Dloadfleet.interval_ms} (default 1000).
   */
  public static LoadfleetStats fromSystemProperties() {
    int intervalMs = Integer.getInteger("loadfleet.interval_ms", 1000);
    long now = System.currentTimeMillis();
    long startAt = Long.getLong("loadfleet.start_at_ms", (now / intervalMs + 1) * intervalMs);
    long durationMs = Long.getLong("loadfleet.duration_ms", 60_000L);
    return new LoadfleetStats(startAt, intervalMs, startAt + durationMs, 10_000);
  }

  /** This JVM's share of the plan's load (users or rate, duration, barrier, targets): {@link Share}. */
  public static Share share() {
    return Share.fromSystemProperties();
  }

  public long startAtMs() {
    return recorder.startAtMs();
  }

  public long endAtMs() {
    return endAtMs;
  }

  /** True while load should go on: before the end time and not stopped. */
  public boolean running() {
    return running(endAtMs);
  }

  /** True while load ending at {@code untilMs} (a population's end) should go on. */
  boolean running(long untilMs) {
    return !stopping && System.currentTimeMillis() < untilMs;
  }

  /** The scenario the rows of this user's requests count under ("" unless by scenario). */
  String scenarioOf(Session session) {
    return byScenario ? session.scenario() : "";
  }

  /**
   * {@code request}, measured: a chain of three actions (take the start time, the request, record
   * the outcome) that counts under (target, name). A response Gatling marked KO (a check of the
   * request failed, Gatling's default status check included: 2xx and 304 unless the request
   * checks the status itself) counts as a response that failed a check ({@code check_failed}),
   * with Gatling's reason as an error sample of kind CHECK. Leaves the session marked as
   * succeeded: the KO is counted here, it does not carry over to the next request.
   */
  public ChainBuilder timed(String target, String name, HttpRequestActionBuilder request) {
    return timed(target, name, request, null, 0);
  }

  /**
   * {@code request} measured and, when {@code judge} is given, judged as a journey request: the
   * response's status, headers and body (up to the job's max_body_bytes) are kept from Gatling's
   * response processing to the action after it, which runs the extractions and checks on them,
   * stores the values found in the user's session, counts every check and leaves what the user
   * does next in {@link #THEN}. Gatling's own verdict is then only for a request without a response.
   */
  ChainBuilder timed(String target, String name, HttpRequestActionBuilder request, Judge judge, long firstUser) {
    return exec(session -> {
          inFlight.incrementAndGet();
          long now = System.nanoTime();
          // Only this request's KO marks the session failed by the time the last action reads it.
          Session started = session.markAsSucceeded();
          if (!started.contains(DUE_NS)) {
            return started.set(T0, now);
          }
          long due = started.getLong(DUE_NS);
          recorder.sent(scenarioOf(started), target, name, Math.max(0, (now - due) / 1000));
          return started.set(T0, due);
        })
        .exec(request.transformResponse((response, session) -> {
          // Runs before Gatling's checks, once per response (each hop of a redirect it follows).
          long latencyUs = (System.nanoTime() - session.getLong(T0)) / 1000;
          answers.merge(session.userId(),
              new IntervalRecorder.Answer(response.status().code(), latencyUs, responseBytes(response),
                  requestBytes(response)),
              IntervalRecorder.Answer::then);
          if (judge != null) {
            seen.put(session.userId(), seen(response, latencyUs, judge.maxBodyBytes()));
          }
          return response;
        }))
        .exec(session -> {
          inFlight.decrementAndGet();
          Session after = judge == null ? session : judged(target, name, session, judge, firstUser);
          if (judge == null) {
            record(target, name, session);
          }
          return after.removeAll(T0, DUE_NS).markAsSucceeded();
        });
  }

  /**
   * A journey request that just ended: a response judged (values into the session, {@link #THEN}
   * set), or an error (the user goes on, as in the engine).
   */
  private Session judged(String target, String name, Session session, Judge judge, long firstUser) {
    String reason = ErrorCapture.take(session.userId());
    IntervalRecorder.Answer answer = answers.remove(session.userId());
    Judge.Seen response = seen.remove(session.userId());
    if (answer == null || response == null) {
      recorder.error(scenarioOf(session), target, name, ErrorCapture.classify(reason), reason);
      return session.set(THEN, Judge.Then.CONTINUE.name());
    }
    Judge.Verdict verdict = judge.judge(response, session, firstUser);
    recorder.judged(scenarioOf(session), target, name, answer, verdict);
    Session after = session;
    for (Map.Entry<String, String> v : verdict.values().entrySet()) {
      after = after.set(Template.attribute(v.getKey()), v.getValue());
    }
    return after.set(THEN, verdict.then().name());
  }

  private static Judge.Seen seen(Response response, long latencyUs, int maxBodyBytes) {
    List<Map.Entry<String, String>> headers = new ArrayList<>();
    for (Map.Entry<String, String> h : response.headers()) {
      headers.add(new AbstractMap.SimpleImmutableEntry<>(h.getKey(), h.getValue()));
    }
    byte[] body = response.body().bytes();
    int kept = Math.min(body.length, maxBodyBytes);
    String text = new String(body, 0, kept, StandardCharsets.ISO_8859_1);
    return new Judge.Seen(response.status().code(), headers, text, latencyUs);
  }

  /** The outcome of the user's request that just ended: a response and its verdict, or an error. */
  private void record(String target, String name, Session session) {
    // Gatling's reason for a KO, logged before this action runs; taken every time, so that a
    // stale reason (a request outside the hook) is never given to a later one.
    String reason = ErrorCapture.take(session.userId());
    IntervalRecorder.Answer answer = answers.remove(session.userId());
    String scenario = scenarioOf(session);
    if (answer == null) {
      recorder.error(scenario, target, name, ErrorCapture.classify(reason), reason);
    } else {
      recorder.response(scenario, target, name, answer, session.isFailed() ? CheckFailure.of(reason) : null);
    }
  }

  /** Open model: a request of (target, name) fell due now. */
  public void scheduled(String target, String name) {
    scheduled("", target, name);
  }

  void scheduled(String scenario, String target, String name) {
    recorder.scheduled(scenario, target, name);
  }

  /** Open model: a due request was dropped (it fell due after the end of the load). */
  public void notSent(String target, String name) {
    recorder.notSent("", target, name);
  }

  /** Prints `ready` and starts reporting intervals; call when the simulation starts. */
  public synchronized void ready() {
    ObjectNode ready = event("ready");
    ((ObjectNode) ready.get("ready")).put("version", VERSION);
    emit(ready);
    ACTIVE.set(this);
    scheduleTick();
  }

  /** The hook that printed `ready` in this JVM, or null (a simulation without the hook). */
  static LoadfleetStats active() {
    return ACTIVE.get();
  }

  /**
   * Reports every interval not yet reported, the last one final, then `finished`. Idempotent.
   * The last is the load's last interval (or the current one, when stopped early); only what
   * ended after the ticker reported that one (see END_GRACE_MS) is reported in the interval
   * after it.
   */
  public synchronized void finish() {
    if (finished) {
      return;
    }
    finished = true;
    ticker.shutdownNow();
    long last = Math.max(nextToEmit, Math.min(recorder.intervalAt(System.currentTimeMillis()), recorder.lastIndex()));
    if (nextToEmit <= recorder.lastIndex() || recorder.pending()) {
      for (long i = nextToEmit; i < last; i++) {
        emitInterval(recorder.take(i, false));
      }
      emitInterval(recorder.take(last, true));
    }
    emit(event("finished"));
  }

  private void scheduleTick() {
    long due = recorder.intervalStartMs(nextToEmit + 1) + (nextToEmit == recorder.lastIndex() ? END_GRACE_MS : TICK_GRACE_MS);
    long delay = Math.max(0, due - System.currentTimeMillis());
    ticker.schedule(this::tick, delay, TimeUnit.MILLISECONDS);
  }

  private synchronized void tick() {
    if (finished) {
      return;
    }
    long now = System.currentTimeMillis();
    long current = recorder.intervalAt(now - TICK_GRACE_MS);
    if (current > recorder.lastIndex() && now < recorder.intervalStartMs(recorder.lastIndex() + 1) + END_GRACE_MS) {
      current = recorder.lastIndex();  // the last interval waits for the requests in flight at the end
    }
    for (; nextToEmit < current; nextToEmit++) {
      emitInterval(recorder.take(nextToEmit, false));
    }
    if (nextToEmit <= recorder.lastIndex()) {
      scheduleTick();
    }
  }

  private void emitInterval(ObjectNode report) {
    ObjectNode event = JsonNodeFactory.instance.objectNode();
    event.set("interval", report);
    emit(event);
  }

  private static ObjectNode event(String kind) {
    ObjectNode event = JsonNodeFactory.instance.objectNode();
    event.putObject(kind);
    return event;
  }

  private static void emit(ObjectNode event) {
    System.out.println(PREFIX + event.toString());
    System.out.flush();
  }

  /** Ends load: in-flight requests finish (up to the drain timeout), the rest is reported, the JVM halts. */
  void stopGracefully() {
    stopping = true;
    long deadline = System.currentTimeMillis() + drainTimeoutMs;
    while (inFlight.get() > 0 && System.currentTimeMillis() < deadline) {
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        break;
      }
    }
    finish();
    System.out.flush();
    Runtime.getRuntime().halt(0);
  }

  private static long responseBytes(Response response) {
    long bytes = "HTTP/1.1 000 \r\n".length() + response.status().reasonPhrase().length() + 2;
    bytes += headerBytes(response.headers());
    return bytes + response.body().length();
  }

  private static long requestBytes(Response response) {
    var request = response.request();
    long bytes = request.getMethod().name().length() + 1 + request.getUri().toRelativeUrl().length()
        + " HTTP/1.1\r\n".length() + 2 + headerBytes(request.getHeaders());
    if (!request.getHeaders().contains("host")) {
      bytes += "Host: \r\n".length() + request.getUri().getHost().length() + 1
          + String.valueOf(request.getUri().getExplicitPort()).length();
    }
    if (request.getBody() != null) {
      bytes += request.getBody().getBytes().length;
    }
    return bytes;
  }

  private static long headerBytes(HttpHeaders headers) {
    long bytes = 0;
    for (Map.Entry<String, String> h : headers) {
      bytes += h.getKey().length() + 2 + h.getValue().length() + 2;
    }
    return bytes;
  }
}
