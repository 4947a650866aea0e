package loadfleet.gatling;

import static io.gatling.javaapi.core.CoreDsl.ByteArrayBody;
import static io.gatling.javaapi.core.CoreDsl.asLongAs;
import static io.gatling.javaapi.core.CoreDsl.atOnceUsers;
import static io.gatling.javaapi.core.CoreDsl.constantUsersPerSec;
import static io.gatling.javaapi.core.CoreDsl.doIf;
import static io.gatling.javaapi.core.CoreDsl.doSwitch;
import static io.gatling.javaapi.core.CoreDsl.exec;
import static io.gatling.javaapi.core.CoreDsl.exitHereIf;
import static io.gatling.javaapi.core.CoreDsl.nothingFor;
import static io.gatling.javaapi.core.CoreDsl.onCase;
import static io.gatling.javaapi.core.CoreDsl.pause;
import static io.gatling.javaapi.core.CoreDsl.scenario;
import static io.gatling.javaapi.http.HttpDsl.flushCookieJar;
import static io.gatling.javaapi.http.HttpDsl.http;
import static io.gatling.javaapi.http.HttpDsl.status;

import com.fasterxml.jackson.databind.JsonNode;
import io.gatling.javaapi.core.ChainBuilder;
import io.gatling.javaapi.core.Choice;
import io.gatling.javaapi.core.OpenInjectionStep;
import io.gatling.javaapi.core.PopulationBuilder;
import io.gatling.javaapi.core.ScenarioBuilder;
import io.gatling.javaapi.core.Session;
import io.gatling.javaapi.http.HttpRequestActionBuilder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One population of a job ({@link Populations.Part}): a Gatling scenario named as the job's
 * scenario, whose users run that scenario's requests, session and journey (its nested JobSpec)
 * from its start to its end, injected as its load model says.
 *
 * <p>Closed clients and users are Gatling users injected at once that loop until the end (not
 * Gatling's closed injection, which replaces a user after each run of the scenario: a session's
 * `once` steps, `repeat` and ${user} would start over); those of a scenario that starts after the
 * barrier are injected ARRIVAL_LEAD_MS before its start (nothingFor until then) and wait for it
 * exactly. Open arrivals draw their due times from {@link Arrivals} and count latency from them.
 */
final class Population {
  private static final String PICK = "loadfleet.pick";
  private static final String DUE_MS = "loadfleet.due_ms";
  // Users are injected this long before their start (Gatling's start is not exact) and wait.
  static final long ARRIVAL_LEAD_MS = 2000;
  // Poisson arrivals are random in number: inject more users than the mean, extras do nothing.
  private static final double POISSON_ARRIVALS_FACTOR = 1.25;
  // The methods a plan may give a request (plan.schema.json).
  private static final List<String> METHODS = List.of("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS");
  // The engine's implicit status check: a response is ok when its status is 200-399.
  private static final int OK_STATUS_LOW = 200;
  private static final int OK_STATUS_HIGH = 399;
  // Whether a user ran its session's `once` steps since it started or restarted.
  private static final String ONCE_DONE = "loadfleet.once_done";

  private final Populations.Part part;
  private final JsonNode job;
  private final LoadfleetStats stats;
  private final long agentIndex;
  private final List<String> targets = new ArrayList<>();
  private final List<Long> targetWeights = new ArrayList<>();
  private final List<JsonNode> requests = new ArrayList<>();
  private final List<JourneyRequest> built = new ArrayList<>();
  // The job's variables (a journey's), their session attributes cleared by a restart.
  private final List<String> variables = new ArrayList<>();
  private final long firstUser;
  private final boolean cookiesOff;
  // This population's users in the order they start (from 0): ${user} is first_user plus it,
  // and a users model's user k starts k / spawn rate after the start. Gatling's userId counts
  // across every population of the JVM, so it cannot number one scenario's users.
  private final AtomicLong started = new AtomicLong();
  private Arrivals arrivals;

  Population(Populations.Part part, long agentIndex, LoadfleetStats stats) {
    this.part = part;
    this.job = part.job();
    this.stats = stats;
    this.agentIndex = agentIndex;
    for (JsonNode t : job.path("targets")) {
      targets.add(t.path("url").asText());
      targetWeights.add(t.path("weight").asLong(1));
    }
    job.path("requests").forEach(requests::add);
    if (targets.isEmpty() || requests.isEmpty()) {
      throw new IllegalArgumentException(part.field() + "the job has no targets or no requests");
    }
    job.path("variables").forEach(v -> variables.add(v.asText()));
    firstUser = job.path("first_user").asLong(0);
    cookiesOff = job.path("cookies").path("off").asBoolean(false);
    for (int r = 0; r < requests.size(); r++) {
      String method = method(requests.get(r));
      if (!METHODS.contains(method)) {
        throw new IllegalArgumentException(part.field() + "requests[" + r + "].method: " + method + " is none of "
            + METHODS);
      }
      built.add(JourneyRequest.of(requests.get(r), r, variables, JourneyRequest.maxBodyBytes(job), method));
    }
  }

  /** Load begins now at the earliest: open arrivals due while Gatling was starting are not sent. */
  void ready(long nowMs) {
    if (arrivals != null) {
      arrivals.notBefore(nowMs);
    }
  }

  /** This population's users injected from its start to its end. */
  PopulationBuilder injected() {
    JsonNode load = job.path("load");
    if (load.has("open")) {
      return open(load.get("open"));
    }
    // A scenario starting after the barrier: its users come ARRIVAL_LEAD_MS before its start
    // (not idle in Gatling since its start); from the barrier, at Gatling's start as ever.
    Duration offset = Duration.ofMillis(part.startAtMs() > stats.startAtMs()
        ? Math.max(0, part.startAtMs() - System.currentTimeMillis() - ARRIVAL_LEAD_MS) : 0);
    if (load.has("users")) {
      JsonNode users = load.get("users");
      double spawn = users.path("spawn_rate_per_s").asDouble(0);
      // User k (from 0) starts at the start plus k / spawn rate: the population grows from its
      // start whenever Gatling itself started.
      ChainBuilder arrive = pauseUntil(s -> part.startAtMs()
          + (spawn > 0 ? Math.round(s.getLong(Template.USER) * 1000 / spawn) : 0));
      return scenario(part.name()).exec(begin()).exec(arrive).exec(clients(users.path("think")))
          .injectOpen(delayed(offset, atOnceUsers(users.path("users").asInt())));
    }
    JsonNode closed = load.path("closed");
    return scenario(part.name()).exec(begin()).exec(pauseUntil(s -> part.startAtMs()))
        .exec(clients(closed.path("think"))).injectOpen(delayed(offset, atOnceUsers(closed.path("clients").asInt())));
  }

  private static OpenInjectionStep[] delayed(Duration offset, OpenInjectionStep step) {
    return offset.isZero() ? new OpenInjectionStep[] {step} : new OpenInjectionStep[] {nothingFor(offset), step};
  }

  private PopulationBuilder open(JsonNode open) {
    double rate = open.path("rate_per_s").asDouble();
    boolean poisson = open.path("poisson").asBoolean(false);
    arrivals = new Arrivals(part.startAtMs(), rate, poisson);
    // Users arrive up to ARRIVAL_LEAD_MS ahead (Gatling's start is not exact) and wait for the
    // due time they draw; extra arrivals (due after the end) do nothing.
    long early = Math.max(0, part.startAtMs() - System.currentTimeMillis() - ARRIVAL_LEAD_MS);
    long durationMs = part.endAtMs() - part.startAtMs() + ARRIVAL_LEAD_MS;
    ScenarioBuilder users = scenario(part.name())
        .exec(begin())
        .exec(s -> s.set(DUE_MS, arrivals.next()))
        .doIf(s -> s.getLong(DUE_MS) < part.endAtMs()).then(
            pauseUntil(s -> s.getLong(DUE_MS))
                .exec(s -> s.set(LoadfleetStats.DUE_NS, nanoTimeAt(s.getLong(DUE_MS))))
                .exec(doIf(s -> running()).then(pickAndSend(true))));
    return users.injectOpen(nothingFor(Duration.ofMillis(early)),
        constantUsersPerSec(poisson ? rate * POISSON_ARRIVALS_FACTOR : rate).during(Duration.ofMillis(durationMs)));
  }

  /** A user's first action: its index in this population and the job's ${agent}. */
  private ChainBuilder begin() {
    return exec(s -> s.set(Template.USER, started.getAndIncrement()).set(Template.AGENT, agentIndex));
  }

  private boolean running() {
    return stats.running(part.endAtMs());
  }

  private static ChainBuilder pauseUntil(java.util.function.Function<Session, Long> atMs) {
    return pause(s -> Duration.ofMillis(Math.max(0, atMs.apply(s) - System.currentTimeMillis())));
  }

  private static long nanoTimeAt(long wallClockMs) {
    return System.nanoTime() + (wallClockMs - System.currentTimeMillis()) * 1_000_000;
  }

  /**
   * What a client or user does until the end: the job's session (its `once` steps first and again
   * after a restart, then its steps, `repeat` rounds or until the end), or weighted picks with
   * think time. After each request the user follows its verdict (Judge.Then): a stop ends the
   * user (Gatling's exitHere), a restart skips the rest of the round, then starts afresh (no
   * variables, an empty cookie jar, `once` again); rounds done stay done, as in the engine.
   */
  private ChainBuilder clients(JsonNode think) {
    JsonNode session = job.path("session");
    if (session.path("steps").isEmpty()) {
      return asLongAs(s -> running()).on(pickAndSend(false).exec(afterRequest()).exec(restartIfAsked())
          .exec(think(think)));
    }
    ChainBuilder once = exec(s -> s);
    for (JsonNode step : session.path("once")) {
      once = once.exec(step(step));
    }
    ChainBuilder steps = exec(s -> s);
    for (JsonNode step : session.get("steps")) {
      steps = steps.exec(step(step));
    }
    int times = session.path("repeat").asInt(0);
    ChainBuilder round = exec(restartIfAsked())
        .doIf(s -> !s.getBoolean(ONCE_DONE)).then(once.exec(s -> s.set(ONCE_DONE, !restarting(s))))
        .exec(steps)
        .exec(s -> restarting(s) ? s : s.set(Template.ITERATION, s.getLong(Template.ITERATION) + 1));
    return exec(s -> s.set(ONCE_DONE, session.path("once").isEmpty()).set(Template.ITERATION, 0L))
        .asLongAs(s -> running() && (times == 0 || s.getLong(Template.ITERATION) < times)).on(round);
  }

  /** One step of a session: skipped once the load ends or the round is being restarted. */
  private ChainBuilder step(JsonNode step) {
    return doIf(s -> running() && !restarting(s))
        .then(sendTo(step.path("request").asInt(0)).exec(afterRequest()).exec(think(step.path("think_after"))));
  }

  /** A user whose request's verdict says stop ends here (counted in users_stopped). */
  private static ChainBuilder afterRequest() {
    return exitHereIf(s -> Judge.Then.STOP.name().equals(s.getString(LoadfleetStats.THEN)));
  }

  private static boolean restarting(Session s) {
    return Judge.Then.RESTART.name().equals(s.getString(LoadfleetStats.THEN));
  }

  /** After a restart: a new user's session (no variables, an empty jar, `once` due again). */
  private ChainBuilder restartIfAsked() {
    List<String> attributes = new ArrayList<>(List.of(LoadfleetStats.THEN, ONCE_DONE));
    variables.forEach(v -> attributes.add(Template.attribute(v)));
    boolean noOnce = job.path("session").path("once").isEmpty();
    return doIf(Population::restarting).then(exec(s -> s.removeAll(attributes.toArray(String[]::new))
        .set(ONCE_DONE, noOnce)).exec(flushCookieJar()));
  }

  private static ChainBuilder think(JsonNode think) {
    if (think.has("fixed_ms")) {
      return pause(Duration.ofMillis(think.get("fixed_ms").asLong()));
    }
    if (think.has("uniform")) {
      long min = think.get("uniform").path("min_ms").asLong();
      long max = think.get("uniform").path("max_ms").asLong();
      return pause(s -> Duration.ofMillis(ThreadLocalRandom.current().nextLong(min, max + 1)));
    }
    if (think.has("exponential_mean_ms")) {
      double mean = think.get("exponential_mean_ms").asDouble();
      return pause(s -> Duration.ofMillis(Math.round(-mean * Math.log(1 - ThreadLocalRandom.current().nextDouble()))));
    }
    return exec(s -> s);
  }

  /** One weighted pick of (target, request) and that request. */
  private ChainBuilder pickAndSend(boolean open) {
    long[] weights = new long[targets.size() * requests.size()];
    List<Choice.WithKey> choices = new ArrayList<>();
    for (int t = 0; t < targets.size(); t++) {
      for (int r = 0; r < requests.size(); r++) {
        int key = t * requests.size() + r;
        weights[key] = targetWeights.get(t) * requests.get(r).path("weight").asLong(1);
        choices.add(onCase(key).then(send(t, r, open)));
      }
    }
    return switchOn(weights, choices);
  }

  /** Request number {@code r} (a session step) to a weighted pick of the targets. */
  private ChainBuilder sendTo(int r) {
    long[] weights = targetWeights.stream().mapToLong(Long::longValue).toArray();
    List<Choice.WithKey> choices = new ArrayList<>();
    for (int t = 0; t < targets.size(); t++) {
      choices.add(onCase(t).then(send(t, r, false)));
    }
    return switchOn(weights, choices);
  }

  /** A weighted choice among {@code choices} (Gatling's doSwitch wants at least two). */
  private static ChainBuilder switchOn(long[] weights, List<Choice.WithKey> choices) {
    if (choices.size() == 1) {
      return exec(choices.get(0).chain);
    }
    return exec(s -> s.set(PICK, pick(weights))).exec(doSwitch(s -> s.getInt(PICK)).on(choices));
  }

  private ChainBuilder send(int t, int r, boolean open) {
    String target = targets.get(t);
    JourneyRequest spec = built.get(r);
    String name = spec.name();
    Template path = spec.path();
    HttpRequestActionBuilder request = http(s -> name).httpRequest(spec.method(),
        s -> target + Template.utf8Of(path.render(s, firstUser)));
    // The engine's implicit status check replaces Gatling's default (2xx and 304): a 3xx is ok.
    // A judged request is judged by Judge alone: Gatling's check only keeps its default away.
    request = spec.judge() == null ? request.check(status().gte(OK_STATUS_LOW), status().lte(OK_STATUS_HIGH))
        : request.check(status().gte(0));
    for (int h = 0; h < spec.headerNames().size(); h++) {
      Template value = spec.headerValues().get(h);
      request = request.header(spec.headerNames().get(h), s -> Template.utf8Of(value.render(s, firstUser)));
    }
    if (spec.body() != null) {
      Template body = spec.body();
      request = request.body(ByteArrayBody(s -> body.render(s, firstUser).getBytes(StandardCharsets.ISO_8859_1)));
    }
    ChainBuilder timed = stats.timed(target, name, request, spec.judge(), firstUser);
    // `cookies: false`: the user's jar is emptied before each request, so no Cookie header is
    // ever sent (Gatling's jar cannot be turned off; a cookie extraction reads Set-Cookie itself).
    ChainBuilder sent = cookiesOff ? exec(flushCookieJar()).exec(timed) : timed;
    return open ? exec(s -> {
      stats.scheduled(stats.scenarioOf(s), target, name);
      return s;
    }).exec(sent) : sent;
  }

  /** A request's method, GET when the job leaves it out. */
  private static String method(JsonNode request) {
    String method = request.path("method").asText("");
    return method.isEmpty() ? "GET" : method;
  }

  private static int pick(long[] weights) {
    long total = 0;
    for (long w : weights) {
      total += Math.max(0, w);
    }
    if (total == 0) {
      return ThreadLocalRandom.current().nextInt(weights.length);
    }
    long x = ThreadLocalRandom.current().nextLong(total);
    for (int i = 0; i < weights.length; i++) {
      x -= Math.max(0, weights[i]);
      if (x < 0) {
        return i;
      }
    }
    return weights.length - 1;
  }
}
