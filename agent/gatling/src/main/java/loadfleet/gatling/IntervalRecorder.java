package loadfleet.gatling;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.HdrHistogram.Histogram;

/**
 * Per-interval statistics per (scenario, target, request), the same fields as loadfleet's
 * IntervalStats; the scenario is "" in a job without scenarios (its rows carry none, as before).
 *
 * <p>A request counts in the interval in which it ended; intervals are wall-clock multiples of
 * {@code intervalMs} from {@code startAtMs}. A request that ends in an interval already taken (a
 * race with the ticker) counts in the oldest interval not yet taken: it is never lost. A request
 * that ends after the load does (it was in flight at the end) counts in the load's last interval
 * while that one is not taken, as the native engine counts it: the run then has no interval past
 * its end holding a handful of stragglers (a drop in requests/s and a spike of p99 on a chart, and
 * requests outside the run's step).
 *
 * <p>Thread-safe: Gatling's event loops record concurrently; one lock keeps it simple and exact
 * (a record is a few counter increments and one histogram record).
 */
final class IntervalRecorder {
  // The same bounds as loadfleet.wire.stats: 1 µs .. 1 h, 3 significant digits.
  static final long LOWEST_US = 1;
  static final long HIGHEST_US = 3_600_000_000L;
  static final int SIGNIFICANT_DIGITS = 3;
  static final int ERROR_SAMPLES_PER_INTERVAL = 10;
  // As the native engine: a request sent more than 1 ms after it was due is late.
  static final long LATE_AFTER_US = 1000;

  /** ErrorKind values of stats.proto, by their JSON names. */
  enum ErrorKind {
    // stats.proto's ErrorKind in its order (tests/wire/test_error_kinds.py compares them).
    // CHECK is for samples only: a response that failed a check counts in check_failed.
    // The H2_ kinds are the native engine's HTTP/2 (this driver leaves HTTP/2 to Gatling, which reports no frame-level errors),
    // REDIRECT_REFUSED its redirects (this driver refuses plan redirects).
    CONNECT_REFUSED, CONNECT_TIMEOUT, TIMEOUT, RESET, PROTOCOL, TLS, OTHER, LOCAL_PORTS, LOCAL_FDS, CHECK, TEMPLATE,
    H2_RST_INTERNAL, H2_REFUSED_STREAM, H2_RST_CANCEL, H2_RST_ENHANCE_YOUR_CALM, H2_RST_OTHER, H2_GOAWAY_UNPROCESSED,
    H2_GOAWAY, H2_PROTOCOL, REDIRECT_REFUSED;

    String protoName() {
      return "ERROR_KIND_" + name();
    }
  }

  /**
   * A response as the hook measured it: its status, latency (µs) and bytes. A redirect Gatling
   * followed is one response: the last hop's status, latency to its end, every hop's bytes.
   */
  record Answer(int status, long latencyUs, long bytesIn, long bytesOut) {
    Answer then(Answer next) {
      return new Answer(next.status, next.latencyUs, bytesIn + next.bytesIn, bytesOut + next.bytesOut);
    }
  }

  /** An error sample as stats.proto's ErrorSample; {@code check} only for kind CHECK. */
  private record Sample(String target, String request, ErrorKind kind, String message, String check) {}

  private static final class Cell {
    long requests;
    // Responses that failed a check (Gatling's KO); a response counts once, never in errors.
    long checkFailed;
    final long[] status = new long[5];
    final long[] errors = new long[ErrorKind.values().length];
    long bytesIn;
    long bytesOut;
    long scheduled;
    long sentLate;
    long maxSendLagUs;
    long notSent;
    // A journey's declared checks (then extractions) by name: {passed, failed}, in first-seen
    // order (the job's order). Bounded by the job: at most 16 checks + 16 extractions a request.
    final Map<String, long[]> checks = new LinkedHashMap<>();
    long usersStopped;
    long sessionsRestarted;
    final Histogram latency = new Histogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS);
  }

  private static final class Bucket {
    // By (scenario, target, request): at most the job's scenarios (16) times its targets times
    // its request names, the bound the controller checks for a report (MAX_ROWS_PER_REPORT).
    final Map<List<String>, Cell> cells = new LinkedHashMap<>();
    final List<Sample> samples = new ArrayList<>();
  }

  private final long startAtMs;
  private final int intervalMs;
  private final long lastIndex;
  private final TreeMap<Long, Bucket> buckets = new TreeMap<>();
  private long nextToTake;

  /** Intervals from {@code startAtMs} until the load ends at {@code endAtMs}. */
  IntervalRecorder(long startAtMs, int intervalMs, long endAtMs) {
    this.startAtMs = startAtMs;
    this.intervalMs = intervalMs;
    this.lastIndex = Math.max(0, Math.floorDiv(endAtMs - 1 - startAtMs, intervalMs));
  }

  /** Index of the load's last interval (the one holding its end). */
  long lastIndex() {
    return lastIndex;
  }

  /** True when something was recorded that no take has reported yet. */
  synchronized boolean pending() {
    return !buckets.isEmpty();
  }

  long startAtMs() {
    return startAtMs;
  }

  int intervalMs() {
    return intervalMs;
  }

  /** Index of the interval containing wall-clock time {@code nowMs} (negative before the start). */
  long intervalAt(long nowMs) {
    return Math.floorDiv(nowMs - startAtMs, intervalMs);
  }

  long intervalStartMs(long index) {
    return startAtMs + index * intervalMs;
  }

  /**
   * A response; {@code failed} is the check it failed (Gatling marked it KO), or null when it
   * passed. The response and its verdict count together, in one interval: a row never holds
   * more failed checks than responses.
   */
  void response(String scenario, String target, String request, Answer answer, CheckFailure failed) {
    synchronized (this) {
      long now = System.currentTimeMillis();
      Cell cell = cell(now, scenario, target, request);
      cell.requests++;
      cell.status[Math.max(1, Math.min(5, answer.status() / 100)) - 1]++;
      cell.bytesIn += answer.bytesIn();
      cell.bytesOut += answer.bytesOut();
      cell.latency.recordValue(Math.max(LOWEST_US, Math.min(HIGHEST_US, answer.latencyUs())));
      if (failed != null) {
        cell.checkFailed++;
        sample(now, new Sample(target, request, ErrorKind.CHECK, failed.message(), failed.check()));
      }
    }
  }

  /**
   * A journey response judged by JobSimulation ({@link Judge}): every declared check counted,
   * each failure sampled under its check's name, the response counted once in check_failed when
   * it failed any (the implicit status check included), and its user's next move counted.
   */
  void judged(String scenario, String target, String request, Answer answer, Judge.Verdict verdict) {
    synchronized (this) {
      response(scenario, target, request, answer, null);
      long now = System.currentTimeMillis();
      Cell cell = cell(now, scenario, target, request);
      for (Judge.Count count : verdict.counts()) {
        cell.checks.computeIfAbsent(count.name(), k -> new long[2])[count.failure() == null ? 0 : 1]++;
        if (count.failure() != null) {
          sample(now, new Sample(target, request, ErrorKind.CHECK, count.failure(), count.name()));
        }
      }
      // A response counts once; the implicit status check is counted here, unsampled (as the engine).
      cell.checkFailed += verdict.failed() ? 1 : 0;
      switch (verdict.then()) {
        case RESTART -> cell.sessionsRestarted++;
        case STOP -> cell.usersStopped++;
        default -> { }
      }
    }
  }

  /** A request that ended without a response ({@code kind} is never CHECK: that is a response). */
  void error(String scenario, String target, String request, ErrorKind kind, String message) {
    synchronized (this) {
      long now = System.currentTimeMillis();
      Cell cell = cell(now, scenario, target, request);
      cell.requests++;
      cell.errors[kind.ordinal()]++;
      sample(now, new Sample(target, request, kind, message, ""));
    }
  }

  // At most ERROR_SAMPLES_PER_INTERVAL samples per interval, errors and failed checks together.
  private void sample(long nowMs, Sample sample) {
    Bucket bucket = buckets.get(indexAt(nowMs));
    if (bucket.samples.size() < ERROR_SAMPLES_PER_INTERVAL) {
      bucket.samples.add(sample);
    }
  }

  /** Open model: a request went out {@code lagUs} after it was due. */
  void sent(String scenario, String target, String request, long lagUs) {
    synchronized (this) {
      Cell cell = cell(System.currentTimeMillis(), scenario, target, request);
      if (lagUs > LATE_AFTER_US) {
        cell.sentLate++;
      }
      cell.maxSendLagUs = Math.max(cell.maxSendLagUs, lagUs);
    }
  }

  void notSent(String scenario, String target, String request) {
    synchronized (this) {
      cell(System.currentTimeMillis(), scenario, target, request).notSent++;
    }
  }

  /** Open model: a request fell due. */
  void scheduled(String scenario, String target, String request) {
    synchronized (this) {
      cell(System.currentTimeMillis(), scenario, target, request).scheduled++;
    }
  }

  /** Where a record made at {@code nowMs} counts (see the class comment). */
  private long indexAt(long nowMs) {
    return Math.max(Math.min(intervalAt(nowMs), lastIndex), nextToTake);
  }

  private Cell cell(long nowMs, String scenario, String target, String request) {
    return buckets.computeIfAbsent(indexAt(nowMs), i -> new Bucket())
        .cells.computeIfAbsent(List.of(scenario, target, request), k -> new Cell());
  }

  /**
   * Takes interval {@code index} (and any older interval not yet taken, merged into it, which can
   * only happen for records made before the first take) as an IntervalReport in protobuf's JSON
   * mapping. Every interval is reported, even an empty one.
   */
  ObjectNode take(long index, boolean last) {
    Bucket merged = new Bucket();
    synchronized (this) {
      Map<Long, Bucket> due = last ? new TreeMap<>(buckets) : new TreeMap<>(buckets.headMap(index, true));
      due.keySet().forEach(buckets::remove);
      if (last && !due.isEmpty()) {
        index = Math.max(index, ((TreeMap<Long, Bucket>) due).lastKey());
      }
      nextToTake = Math.max(nextToTake, index + 1);
      for (Bucket b : due.values()) {
        b.cells.forEach((key, cell) -> merged.cells.merge(key, cell, IntervalRecorder::add));
        for (Sample s : b.samples) {
          if (merged.samples.size() < ERROR_SAMPLES_PER_INTERVAL) {
            merged.samples.add(s);
          }
        }
      }
    }
    return toJson(index, merged, last);
  }

  private static Cell add(Cell a, Cell b) {
    a.requests += b.requests;
    a.checkFailed += b.checkFailed;
    for (int i = 0; i < a.status.length; i++) {
      a.status[i] += b.status[i];
    }
    for (int i = 0; i < a.errors.length; i++) {
      a.errors[i] += b.errors[i];
    }
    a.bytesIn += b.bytesIn;
    a.bytesOut += b.bytesOut;
    a.scheduled += b.scheduled;
    a.sentLate += b.sentLate;
    a.maxSendLagUs = Math.max(a.maxSendLagUs, b.maxSendLagUs);
    a.notSent += b.notSent;
    a.latency.add(b.latency);
    b.checks.forEach((name, counts) -> {
      long[] sum = a.checks.computeIfAbsent(name, k -> new long[2]);
      sum[0] += counts[0];
      sum[1] += counts[1];
    });
    a.usersStopped += b.usersStopped;
    a.sessionsRestarted += b.sessionsRestarted;
    return a;
  }

  private ObjectNode toJson(long index, Bucket bucket, boolean last) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    ObjectNode report = f.objectNode();
    report.put("interval_start_ms", intervalStartMs(index));
    report.put("interval_ms", intervalMs);
    ArrayNode stats = report.putArray("stats");
    bucket.cells.forEach((key, cell) -> {
      ObjectNode s = stats.addObject();
      s.put("target", key.get(1));
      s.put("request", key.get(2));
      if (!key.get(0).isEmpty()) {
        s.put("scenario", key.get(0));  // a job's scenario (stats.proto IntervalStats.scenario)
      }
      s.put("requests", cell.requests);
      for (int i = 0; i < 5; i++) {
        s.put("status_" + (i + 1) + "xx", cell.status[i]);
      }
      ArrayNode errors = s.putArray("errors");
      for (ErrorKind kind : ErrorKind.values()) {
        if (cell.errors[kind.ordinal()] > 0) {
          errors.addObject().put("kind", kind.protoName()).put("count", cell.errors[kind.ordinal()]);
        }
      }
      s.put("bytes_in", cell.bytesIn);
      s.put("bytes_out", cell.bytesOut);
      s.put("scheduled", cell.scheduled);
      s.put("sent_late", cell.sentLate);
      s.put("max_send_lag_us", cell.maxSendLagUs);
      s.put("not_sent", cell.notSent);
      // This hook judges every response (Gatling's KO), so check_failed is the driver's count.
      s.put("check_failed", cell.checkFailed);
      s.put("checks_reported", true);
      ArrayNode checks = s.putArray("checks");
      cell.checks.forEach((name, counts) ->
          checks.addObject().put("name", name).put("passed", counts[0]).put("failed", counts[1]));
      s.put("users_stopped", cell.usersStopped);
      s.put("sessions_restarted", cell.sessionsRestarted);
      if (cell.latency.getTotalCount() > 0) {
        s.put("latency_histogram", encode(cell.latency));
      }
    });
    ArrayNode samples = report.putArray("error_samples");
    for (Sample sample : bucket.samples) {
      ObjectNode s = samples.addObject().put("target", sample.target()).put("request", sample.request())
          .put("kind", sample.kind().protoName()).put("message", sample.message());
      if (!sample.check().isEmpty()) {
        s.put("check", sample.check());
      }
    }
    report.put("final", last);
    return report;
  }

  /** The standard V2 compressed encoding (cookie 0x1c849304), base64 as protobuf JSON wants bytes. */
  static String encode(Histogram histogram) {
    ByteBuffer buffer = ByteBuffer.allocate(histogram.getNeededByteBufferCapacity());
    int length = histogram.encodeIntoCompressedByteBuffer(buffer);
    byte[] bytes = new byte[length];
    buffer.rewind();
    buffer.get(bytes);
    return Base64.getEncoder().encodeToString(bytes);
  }
}
