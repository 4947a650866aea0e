package loadfleet.gatling;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * What populations a job runs and when (docs/gatling.md "Scenarios"). A job without scenarios is
 * one population, named by its model as before scenarios existed. A job with scenarios
 * (JobSpec.scenarios) is one population per scenario, named as the scenario (its stats rows carry
 * that name), from the barrier plus its {@code start_after_ms} for its own {@code duration_ms}
 * (absent: to the job's end). A scenario idle on this agent (its model at level 0: the controller
 * gave this agent no share of it) is left out, as there is nothing to inject.
 */
final class Populations {
  private Populations() {}

  /**
   * One population's spec and times: {@code job} is the JobSpec whose targets, requests, session
   * and load it runs (the scenario's nested one), from {@code startAtMs} to {@code endAtMs}
   * (wall clock); {@code index} is the scenario's position in the job, -1 for a plain job.
   */
  record Part(String name, int index, JsonNode job, long startAtMs, long endAtMs) {
    /** How a problem of this population is introduced: nothing for a plain job. */
    String field() {
      return index < 0 ? "" : "scenarios[" + index + "] (" + name + "): ";
    }
  }

  /** The populations of {@code spec} (protobuf's JSON mapping, proto field names). */
  static List<Part> of(JsonNode spec) {
    long startAt = spec.path("start_at_ms").asLong();
    long endAt = startAt + spec.path("duration_ms").asLong();
    JsonNode scenarios = spec.path("scenarios");
    if (scenarios.isEmpty()) {
      return List.of(new Part("loadfleet-" + model(spec.path("load")), -1, spec, startAt, endAt));
    }
    List<Part> parts = new ArrayList<>();
    for (int i = 0; i < scenarios.size(); i++) {
      JsonNode scenario = scenarios.get(i);
      JsonNode job = scenario.path("job");
      String name = scenario.path("name").asText();
      if (!job.path("scenarios").isEmpty()) {
        throw new IllegalArgumentException("scenarios[" + i + "] (" + name + "): a scenario has no scenarios of its own");
      }
      long start = startAt + scenario.path("start_after_ms").asLong(0);
      long own = job.path("duration_ms").asLong(0);
      long end = own > 0 ? start + own : endAt;
      if (!idle(job.path("load"))) {
        parts.add(new Part(name, i, job, start, end));
      }
    }
    if (parts.isEmpty()) {
      throw new IllegalArgumentException("every scenario of the job is idle on this agent: there is no population to run");
    }
    return parts;
  }

  /** When the last of {@code parts} ends. */
  static long endAtMs(List<Part> parts) {
    return parts.stream().mapToLong(Part::endAtMs).max().orElseThrow();
  }

  /** The load's model as the plan names it. */
  static String model(JsonNode load) {
    return load.has("open") ? "open" : load.has("users") ? "users" : "closed";
  }

  /** Whether {@code load} is its model at level 0 and no stage raises it. */
  static boolean idle(JsonNode load) {
    for (JsonNode stage : load.path("stages")) {
      if (stage.path("target").asDouble(0) > 0) {
        return false;
      }
    }
    if (load.has("open")) {
      return load.get("open").path("rate_per_s").asDouble(0) <= 0;
    }
    if (load.has("users")) {
      return load.get("users").path("users").asLong(0) <= 0;
    }
    return load.path("closed").path("clients").asLong(0) <= 0;
  }
}
