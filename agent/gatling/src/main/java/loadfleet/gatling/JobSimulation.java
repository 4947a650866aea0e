package loadfleet.gatling;

import static io.gatling.javaapi.http.HttpDsl.http;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpServer;
import io.gatling.http.client.uri.Uri;
import io.gatling.javaapi.core.PopulationBuilder;
import io.gatling.javaapi.core.Simulation;
import io.gatling.javaapi.http.HttpProtocolBuilder;
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
 * <p>Scenarios (JobSpec.scenarios) are populations ({@link Populations}, {@link Population}):
 * {@code setUp(pop1, pop2, ...)}, each with its own protocol (keep-alive, targets) and times,
 * one interval grid and one hook for all, rows keyed by scenario. No {@code andThen} (starts are
 * times, not completions) and no {@code throttle} (it ends the whole simulation with its profile).
 *
 * <p>Not supported (the controller refuses such plans for this driver, the agent such jobs):
 * stages, request budgets, sessions in the open model, JSONPath filters and Rust-only regex
 * syntax.
 */
public final class JobSimulation extends Simulation {
  private final HttpServer warmUpServer;
  private final JsonNode spec;
  private final LoadfleetStats stats;
  private final List<Population> populations = new ArrayList<>();

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
    List<Populations.Part> parts = Populations.of(spec);
    int intervalMs = spec.path("interval_ms").asInt(0) > 0 ? spec.path("interval_ms").asInt() : 1000;
    long startAt = spec.path("start_at_ms").asLong();
    long endAt = Populations.endAtMs(parts);
    long drainMs = timeoutMs("connect_timeout_ms", 5000) + timeoutMs("request_timeout_ms", 30000);
    boolean byScenario = !spec.path("scenarios").isEmpty();
    stats = new LoadfleetStats(startAt, intervalMs, endAt, drainMs, byScenario);
    warmUpServer = warmUpServer();
    List<PopulationBuilder> injected = new ArrayList<>();
    for (Populations.Part part : parts) {
      Population population = new Population(part, spec.path("agent_index").asLong(0), stats);
      populations.add(population);
      injected.add(population.injected().protocols(protocol(part.job())));
    }
    // maxDuration only cuts a simulation short (gatling#3794): the latest end plus the drain.
    setUp(injected).maxDuration(Duration.ofMillis(Math.max(0, startAt - System.currentTimeMillis())
        + endAt - startAt + drainMs));
  }

  @Override
  public void before() {
    warmUpServer.stop(0);
    long now = System.currentTimeMillis();
    populations.forEach(p -> p.ready(now));
    stats.ready();
  }

  @Override
  public void after() {
    stats.finish();
  }

  /**
   * A population's protocol, from its JobSpec: keep-alive or not, the checked addresses of its
   * targets, HTTP/2 when a target asks, connections shared by an open model's arrivals.
   */
  private HttpProtocolBuilder protocol(JsonNode job) {
    HttpProtocolBuilder protocol = http.warmUp(warmUpUrl(warmUpServer)).disableCaching().disableFollowRedirect()
        .disableAutoReferer().disableUrlEncoding();
    if (!job.path("keep_alive").asBoolean(false)) {
      protocol = protocol.connectionHeader("close");
    }
    protocol = protocol.hostNameAliases(checkedAddresses(job.path("targets")));
    if (wantsHttp2(job.path("targets"))) {
      // Gatling offers h2 then http/1.1 by ALPN over TLS (no h2c: the controller refuses that).
      protocol = protocol.enableHttp2();
    }
    return job.path("load").has("open") ? protocol.shareConnections() : protocol;
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

  /**
   * The addresses the agent resolved and checked against its allow-list, by target host:
   * Gatling connects to those and never reads the host's text itself (the Host header and TLS
   * server name still come from the URL). IP literals are aliased too: Java reads some
   * differently from the agent (0177.0.0.1 is 127.0.0.1 to glibc, 177.0.0.1 to Java), and
   * Gatling asks its resolver, which looks up these aliases first, for a literal as for a name.
   * The keys are hosts as Gatling's own URL parser gives them (IPv6 in brackets): the text its
   * resolver is asked for. A target without checked addresses stops the job (fail closed).
   */
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
}
