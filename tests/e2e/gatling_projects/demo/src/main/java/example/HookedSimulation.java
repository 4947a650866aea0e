package example;

import static io.gatling.javaapi.core.CoreDsl.scenario;
import static io.gatling.javaapi.http.HttpDsl.http;

import io.gatling.javaapi.core.ScenarioBuilder;
import io.gatling.javaapi.core.Simulation;
import loadfleet.gatling.LoadfleetStats;
import loadfleet.gatling.Share;

/** A user's simulation with loadfleet's helper: latency per request, merged exactly. */
public class HookedSimulation extends Simulation {
  private final LoadfleetStats lf = LoadfleetStats.fromSystemProperties();
  private final Share share = LoadfleetStats.share();
  private final ScenarioBuilder scenario = scenario("hooked")
      .exec(lf.timed(share.target(), "index", http("index").get("/index.html")));

  {
    setUp(share.populate(scenario)).protocols(http.baseUrl(share.target()).disableCaching());
  }

  @Override
  public void before() {
    lf.ready();
  }

  @Override
  public void after() {
    lf.finish();
  }
}
