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
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gatling.javaapi.core.ChainBuilder;
import io.gatling.javaapi.core.OpenInjectionStep;
import io.gatling.javaapi.core.PopulationBuilder;
import io.gatling.javaapi.core.ScenarioBuilder;
import io.gatling.javaapi.core.Session;
import io.gatling.javaapi.core.Simulation;
import io.gatling.javaapi.core.Choice;
import io.gatling.javaapi.http.HttpProtocolBuilder;
import io.gatling.javaapi.http.HttpRequestActionBuilder;
import io.gatling.http.client.uri.Uri;
import com.sun.net.httpserver.HttpServer;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Runs a loadfleet JobSpec on Gatling, so that a plan's declarative workload needs no Java from
 * its user. The spec comes as protobuf's JSON mapping (proto field names) in the file named by
 * {@code -Dloadfleet.job}. Compiled once with the hook; every job only changes that file.
 *
 * <p>Supported: weighted targets and requests (method, path, headers, body), keep-alive or a new
 * connection per request, closed clients and user populations (spawn rate) with think time and
 * sessions, open arrival rates (constant or randomized), barrier start, duration, timeouts.
 * A response is ok when its status is 200-399 (the engine's implicit status check): any other
 * status is a response that failed a check.
 *
 * <p>Journeys run as in the engine: templates in paths, header values and bodies (Template,
 * rendered per request from the user's session), extractions and named checks judged on every
 * response (Judge, through LoadfleetStats), `once` steps, on_fail / on_missing (stop: the user
 * exits; restart: the rest of the round is skipped, then variables and Gatling's cookie jar are
 * emptied and `once` runs again) and `cookies.off` (the jar emptied before each request).
 *
 * <p>Not supported (the controller refuses such plans for this driver, the agent such jobs):
 * stages, request budgets, sessions in the open model, JSONPath filters and Rust-only regex
 * syntax.
 */
public final class JobSimulation extends Simulation {
  private static final String PICK = "loadfleet.pick";
  private static final String DUE_MS = "loadfleet.due_ms";
  private static final long ARRIVAL_LEAD_MS = 2000;
  // Poisson arrivals are random in number: inject more users than the mean, extras do nothing.
  private static final double POISSON_ARRIVALS_FACTOR = 1.25;
  // The methods a plan may give a request (plan.schema.json).
  private static final List<String> METHODS = List.of("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS");
  // The engine's implicit status check: a response is ok when its status is 200-399.
  private static final int OK_STATUS_LOW = 200;
  private static final int OK_STATUS_HIGH = 399;
  // Whether a user ran its session's `once` steps since it started or restarted.
  private static final String ONCE_DONE = "loadfleet.once_done";

  private final HttpServer warmUpServer;
  private final JsonNode spec;
  private Arrivals arrivals;
  private final LoadfleetStats stats;
  private final List<String> targets = new ArrayList<>();
  private final List<Long> targetWeights = new ArrayList<>();
  private final List<JsonNode> requests = new ArrayList<>();
  private final List<JourneyRequest> built = new ArrayList<>();
  // The job's variables (a journey's), their session attributes cleared by a restart.
  private final List<String> variables = new ArrayList<>();
  private final long firstUser;
  private final long agentIndex;
  private final boolean cookiesOff;

  public JobSimulation() {
    String path = System.getProperty("loadfleet.job");
    if (path == null) {
      throw new IllegalArgumentException("-Dloadfleet.job=FILE (a JobSpec in protobuf JSON) is required");
    }
    try {
      spec = new ObjectMapper().readTree(new File(path));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot read the job " + path + ": " + e.getMessage(), e);
    }
    for (JsonNode t : spec.path("targets")) {
      targets.add(t.path("url").asText());
      targetWeights.add(t.path("weight").asLong(1));
    }
    spec.path("requests").forEach(requests::add);
    if (targets.isEmpty() || requests.isEmpty()) {
      throw new IllegalArgumentException("the job has no targets or no requests");
    }
    spec.path("variables").forEach(v -> variables.add(v.asText()));
    firstUser = spec.path("first_user").asLong(0);
    agentIndex = spec.path("agent_index").asLong(0);
    cookiesOff = spec.path("cookies").path("off").asBoolean(false);
    for (int r = 0; r < requests.size(); r++) {
      String method = method(requests.get(r));
      if (!METHODS.contains(method)) {
        throw new IllegalArgumentException("requests[" + r + "].method: " + method + " is none of " + METHODS);
      }
      built.add(JourneyRequest.of(requests.get(r), r, variables, JourneyRequest.maxBodyBytes(spec), method));
    }
    int intervalMs = spec.path("interval_ms").asInt(0) > 0 ? spec.path("interval_ms").asInt() : 1000;
    long startAt = spec.path("start_at_ms").asLong();
    long durationMs = spec.path("duration_ms").asLong();
    long drainMs = timeoutMs("connect_timeout_ms", 5000) + timeoutMs("request_timeout_ms", 30000);
    stats = new LoadfleetStats(startAt, intervalMs, startAt + durationMs, drainMs);

    warmUpServer = warmUpServer();
    HttpProtocolBuilder protocol = http.warmUp(warmUpUrl(warmUpServer)).disableCaching().disableFollowRedirect()
        .disableAutoReferer().disableUrlEncoding();
    if (!spec.path("keep_alive").asBoolean(false)) {
      protocol = protocol.connectionHeader("close");
    }
    protocol = protocol.hostNameAliases(checkedAddresses(spec.path("targets")));
    if (wantsHttp2(spec.path("targets"))) {
      // Gatling offers h2 then http/1.1 by ALPN over TLS (no h2c: the controller refuses that).
      protocol = protocol.enableHttp2();
    }
    JsonNode load = spec.path("load");
    if (load.has("open")) {
      protocol = protocol.shareConnections();
    }
    setUp(population(load)).protocols(protocol)
        .maxDuration(Duration.ofMillis(Math.max(0, startAt - System.currentTimeMillis()) + durationMs + drainMs));
  }

  @Override
  public void before() {
    warmUpServer.stop(0);
    if (arrivals != null) {
      arrivals.notBefore(System.currentTimeMillis());
    }
    stats.ready();
  }

  @Override
  public void after() {
    stats.finish();
  }

  /**
   * Gatling's warm-up request loads and JIT-compiles its HTTP stack before load starts (without
   * it the first second of load runs far below speed). Its default target is on the internet, and
   * one of the job's targets would count a request nobody measured: a throw-away server on
   * loopback inside this JVM answers it instead.
   */
  private static HttpServer warmUpServer() {
    try {
      HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
      server.createContext("/", exchange -> {
        byte[] body = "ok".getBytes(StandardCharsets.US_ASCII);
        exchange.sendResponseHeaders(200, body.length);
        exchange.getResponseBody().write(body);
        exchange.close();
      });
      server.start();
      return server;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start the warm-up server on loopback: " + e.getMessage(), e);
    }
  }

  /**
   * The addresses the agent resolved and checked against its allow-list, by target host:
   * Gatling connects to those and never reads the host's text itself (the Host header and TLS
   * server name still come from the URL). IP literals are aliased too: Java reads some
   * differently from the agent (0177.0.0.1 is 127.0.0.1 to glibc, 177.0.0.1 to Java), and
   * Gatling asks its resolver, which looks up these aliases first, for a literal as for a name.
   * The keys are hosts as Gatling's own URL parser gives them (IPv6 in brackets): the text its
   * resolver is asked for. A target without checked addresses stops the job (fail closed).
   */
  /** Whether a target asks for HTTP/2 (protocol h2 or auto; the JSON omits the default http1). */
  static boolean wantsHttp2(JsonNode targets) {
    for (JsonNode t : targets) {
      String p = t.path("protocol").asText("");
      if (p.equals("HTTP_PROTOCOL_H2") || p.equals("HTTP_PROTOCOL_AUTO")) {
        return true;
      }
    }
    return false;
  }

  static Map<String, List<String>> checkedAddresses(JsonNode targets) {
    Map<String, List<String>> aliases = new LinkedHashMap<>();
    for (JsonNode t : targets) {
      String url = t.path("url").asText();
      if (t.path("addresses").isEmpty()) {
        throw new IllegalArgumentException("the target " + url + " has no checked addresses (the agent "
            + "resolves and checks every target before Gatling starts)");
      }
      List<String> ips = aliases.computeIfAbsent(Uri.create(url).getHost(), h -> new ArrayList<>());
      for (JsonNode address : t.path("addresses")) {
        String text = address.asText();
        String ip = text.startsWith("[") ? text.substring(1, text.indexOf(']')) : text.substring(0, text.lastIndexOf(':'));
        if (!ips.contains(ip)) {
          ips.add(ip);
        }
      }
    }
    return aliases;
  }

  private static String warmUpUrl(HttpServer server) {
    return "http://127.0.0.1:" + server.getAddress().getPort() + "/";
  }

  private long timeoutMs(String field, long fallback) {
    long value = spec.path(field).asLong(0);
    return value > 0 ? value : fallback;
  }

  private PopulationBuilder population(JsonNode load) {
    if (load.has("open")) {
      JsonNode open = load.get("open");
      double rate = open.path("rate_per_s").asDouble();
      boolean poisson = open.path("poisson").asBoolean(false);
      arrivals = new Arrivals(stats.startAtMs(), rate, poisson);
      // Users arrive up to ARRIVAL_LEAD_MS ahead (Gatling's start is not exact) and wait for the
      // due time they draw; extra arrivals (due after the end) do nothing.
      long early = Math.max(0, stats.startAtMs() - System.currentTimeMillis() - ARRIVAL_LEAD_MS);
      long durationMs = stats.endAtMs() - stats.startAtMs() + ARRIVAL_LEAD_MS;
      ScenarioBuilder users = scenario("loadfleet-open")
          .exec(s -> s.set(DUE_MS, arrivals.next()).set(Template.AGENT, agentIndex))
          .doIf(s -> s.getLong(DUE_MS) < stats.endAtMs()).then(
              pauseUntil(s -> s.getLong(DUE_MS))
                  .exec(s -> s.set(LoadfleetStats.DUE_NS, nanoTimeAt(s.getLong(DUE_MS))))
                  .exec(doIf(s -> stats.running()).then(pickAndSend(true))));
      return users.injectOpen(nothingFor(Duration.ofMillis(early)),
          constantUsersPerSec(poisson ? rate * POISSON_ARRIVALS_FACTOR : rate).during(Duration.ofMillis(durationMs)));
    }
    if (load.has("users")) {
      JsonNode users = load.get("users");
      double spawn = users.path("spawn_rate_per_s").asDouble(0);
      // User k (from 1) starts at the barrier plus (k - 1) / spawn rate: the population grows
      // from the barrier whenever Gatling itself started.
      ChainBuilder arrive = pauseUntil(s -> stats.startAtMs()
          + (spawn > 0 ? Math.round((s.userId() - 1) * 1000 / spawn) : 0));
      return scenario("loadfleet-users").exec(arrive).exec(clients(users.path("think")))
          .injectOpen(atOnceUsers(users.path("users").asInt()));
    }
    JsonNode closed = load.path("closed");
    return scenario("loadfleet-closed").exec(pauseUntil(s -> stats.startAtMs())).exec(clients(closed.path("think")))
        .injectOpen(atOnceUsers(closed.path("clients").asInt()));
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
    return exec(s -> s.set(Template.AGENT, agentIndex)).exec(rounds(think));
  }

  private ChainBuilder rounds(JsonNode think) {
    JsonNode session = spec.path("session");
    if (session.path("steps").isEmpty()) {
      return asLongAs(s -> stats.running()).on(pickAndSend(false).exec(afterRequest()).exec(restartIfAsked())
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
        .asLongAs(s -> stats.running() && (times == 0 || s.getLong(Template.ITERATION) < times)).on(round);
  }

  /** One step of a session: skipped once the load ends or the round is being restarted. */
  private ChainBuilder step(JsonNode step) {
    return doIf(s -> stats.running() && !restarting(s))
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
    return doIf(JobSimulation::restarting).then(exec(s -> s.removeAll(attributes.toArray(String[]::new))
        .set(ONCE_DONE, spec.path("session").path("once").isEmpty())).exec(flushCookieJar()));
  }

  private ChainBuilder think(JsonNode think) {
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
      stats.scheduled(target, name);
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
