package example;

import static io.gatling.javaapi.core.CoreDsl.constantConcurrentUsers;
import static io.gatling.javaapi.core.CoreDsl.scenario;
import static io.gatling.javaapi.http.HttpDsl.http;

import io.gatling.javaapi.core.ScenarioBuilder;
import io.gatling.javaapi.core.Simulation;
import java.time.Duration;

/** A user's simulation without loadfleet's helper: it reads its share from system properties. */
public class PlainSimulation extends Simulation {
  private final String target = System.getProperty("loadfleet.targets").split(",")[0];
  private final ScenarioBuilder scenario = scenario("plain")
      .exec(http("index").get("/index.html"))
      .exec(http("missing").get("/no-such-file"));

  {
    int users = Integer.getInteger("loadfleet.users");
    long durationMs = Math.round(Double.parseDouble(System.getProperty("loadfleet.duration_s")) * 1000);
    setUp(scenario.injectClosed(constantConcurrentUsers(users).during(Duration.ofMillis(durationMs))))
        .protocols(http.baseUrl(target).disableCaching());
  }
}
