package loadfleet.gatling;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

/**
 * A job's request as JobSimulation sends it: its path, header values and body as templates, and
 * its judge when it declares checks or extractions (null: Gatling's KO is the verdict, as for a
 * plain request). Built once per job; a request the driver cannot build stops the job at start,
 * naming the request and its field.
 */
record JourneyRequest(String name, String method, Template path, List<String> headerNames,
    List<Template> headerValues, Template body, Judge judge) {
  // The engine's default for JobSpec.max_body_bytes 0.
  static final int DEFAULT_MAX_BODY_BYTES = 256 * 1024;

  static JourneyRequest of(JsonNode spec, int r, List<String> variables, int maxBodyBytes, String method) {
    String field = "requests[" + r + "]";
    String name = spec.path("name").asText();
    Template path = Template.ofUtf8(spec.path("path").asText("/"), variables, field + ".path");
    List<String> headerNames = new ArrayList<>();
    List<Template> headerValues = new ArrayList<>();
    int h = 0;
    for (JsonNode header : spec.path("headers")) {
      headerNames.add(header.path("name").asText());
      headerValues.add(Template.ofUtf8(header.path("value").asText(), variables, field + ".headers[" + h++ + "].value"));
    }
    Template body = null;
    if (spec.hasNonNull("body") && !spec.get("body").asText().isEmpty()) {
      byte[] bytes = Base64.getDecoder().decode(spec.get("body").asText());
      body = Template.parse(new String(bytes, StandardCharsets.ISO_8859_1), variables, field + ".body");
    }
    List<JourneyCheck> checks = new ArrayList<>();
    int c = 0;
    for (JsonNode check : spec.path("checks")) {
      checks.add(new JourneyCheck(check, variables, field + ".checks[" + c++ + "]"));
    }
    List<Extraction> extractions = new ArrayList<>();
    int e = 0;
    for (JsonNode extract : spec.path("extracts")) {
      extractions.add(Extraction.of(extract, variables, field + ".extracts[" + e++ + "]"));
    }
    Judge judge = checks.isEmpty() && extractions.isEmpty() ? null : new Judge(checks, extractions, maxBodyBytes);
    return new JourneyRequest(name, method, path, headerNames, headerValues, body, judge);
  }

  /** The job's max_body_bytes, the engine's default when 0. */
  static int maxBodyBytes(JsonNode spec) {
    int given = spec.path("max_body_bytes").asInt(0);
    return given > 0 ? given : DEFAULT_MAX_BODY_BYTES;
  }
}
