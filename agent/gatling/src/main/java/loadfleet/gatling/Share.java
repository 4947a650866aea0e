package loadfleet.gatling;

import static io.gatling.javaapi.core.CoreDsl.constantConcurrentUsers;
import static io.gatling.javaapi.core.CoreDsl.constantUsersPerSec;
import static io.gatling.javaapi.core.CoreDsl.nothingFor;
import static io.gatling.javaapi.core.CoreDsl.rampConcurrentUsers;

import io.gatling.javaapi.core.ClosedInjectionStep;
import io.gatling.javaapi.core.OpenInjectionStep;
import io.gatling.javaapi.core.PopulationBuilder;
import io.gatling.javaapi.core.ScenarioBuilder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * This JVM's share of a plan's load, as the loadfleet agent passes it to a user's simulation in
 * system properties (docs/gatling.md): {@code loadfleet.model} ({@code closed}, {@code open} or
 * {@code users}), {@code loadfleet.users} (closed clients or users), {@code loadfleet.rate}
 * (open, requests/s), {@code loadfleet.poisson}, {@code loadfleet.ramp_s} (users: time to reach
 * them all), {@code loadfleet.duration_s}, {@code loadfleet.start_at_ms} (the barrier) and
 * {@code loadfleet.targets} (the plan's target URLs, comma-separated).
 *
 * <p>{@link #populate} turns it into Gatling's injection, so that a simulation needs one line:
 * {@code setUp(LoadfleetStats.share().populate(scenario))}.
 */
public record Share(String model, int users, double rate, boolean poisson, double rampS, double durationS,
                    long startAtMs, List<String> targets) {

  public Share {
    targets = List.copyOf(targets);
  }

  /** The share the agent passed; outside the agent, one user for 10 s from now on localhost. */
  public static Share fromSystemProperties() {
    String targets = System.getProperty("loadfleet.targets", "http://127.0.0.1:8080");
    return new Share(
        System.getProperty("loadfleet.model", "closed"),
        Integer.getInteger("loadfleet.users", 1),
        Double.parseDouble(System.getProperty("loadfleet.rate", "0")),
        Boolean.getBoolean("loadfleet.poisson"),
        Double.parseDouble(System.getProperty("loadfleet.ramp_s", "0")),
        Double.parseDouble(System.getProperty("loadfleet.duration_s", "10")),
        Long.getLong("loadfleet.start_at_ms", System.currentTimeMillis()),
        Arrays.asList(targets.split(",")));
  }

  /** The plan's first target (base URL, no path). */
  public String target() {
    return targets.get(0);
  }

  public Duration duration() {
    return Duration.ofMillis(Math.round(durationS * 1000));
  }

  /**
   * {@code scenario} injected as this share says, starting at the barrier (as close as Gatling's
   * start allows: the delay is counted from this call). Closed: {@code users} concurrent users for
   * the duration, each running the scenario once and replaced when done (so the scenario is one
   * client's iteration: requests and think time). Users: the concurrency ramps to {@code users}
   * over {@code ramp_s}, then stays. Open: {@code rate} new users per second, evenly spaced or
   * randomized (Poisson).
   */
  public PopulationBuilder populate(ScenarioBuilder scenario) {
    Duration delay = Duration.ofMillis(Math.max(0, startAtMs - System.currentTimeMillis()));
    if (model.equals("open")) {
      OpenInjectionStep arrivals = poisson
          ? constantUsersPerSec(rate).during(duration()).randomized()
          : constantUsersPerSec(rate).during(duration());
      return scenario.injectOpen(nothingFor(delay), arrivals);
    }
    List<ClosedInjectionStep> steps = new ArrayList<>();
    if (!delay.isZero()) {
      steps.add(constantConcurrentUsers(0).during(delay));
    }
    Duration ramp = Duration.ofMillis(Math.round(Math.min(rampS, durationS) * 1000));
    if (model.equals("users") && !ramp.isZero()) {
      steps.add(rampConcurrentUsers(0).to(users).during(ramp));
    }
    Duration rest = duration().minus(model.equals("users") ? ramp : Duration.ZERO);
    if (!rest.isZero()) {
      steps.add(constantConcurrentUsers(users).during(rest));
    }
    return scenario.injectClosed(steps.toArray(ClosedInjectionStep[]::new));
  }
}
