package loadfleet.gatling;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * JobSimulation's template parser on the shared case table (tests/wire/template_cases.json),
 * for tests/agent/test_gatling_templates.py: reads the table named by its argument and prints,
 * per case in order, what Template made of it in the table's own form ({pieces: [...]} or
 * {error: {kind, offset, name}}). The Python test compares; nothing is judged here.
 */
public final class TemplateCases {
  private TemplateCases() {}

  public static void main(String[] args) throws IOException {
    JsonNode table = new ObjectMapper().readTree(new File(args[0]));
    List<String> variables = new ArrayList<>();
    table.path("names").path("variables").forEach(v -> variables.add(v.asText()));
    ArrayNode out = JsonNodeFactory.instance.arrayNode();
    for (JsonNode c : table.path("cases")) {
      out.add(parsed(c.path("template").asText(), variables));
    }
    System.out.println(out);
  }

  private static ObjectNode parsed(String text, List<String> variables) {
    ObjectNode result = JsonNodeFactory.instance.objectNode();
    try {
      ArrayNode pieces = result.putArray("pieces");
      for (Template.Piece p : Template.ofUtf8(text, variables, "case").pieces()) {
        pieces.add(piece(p));
      }
    } catch (Template.TemplateError e) {
      result.remove("pieces");
      ObjectNode error = result.putObject("error").put("kind", e.kind).put("offset", e.offset);
      if (!e.name.isEmpty()) {
        error.put("name", Template.utf8Of(e.name));
      }
    }
    return result;
  }

  private static ObjectNode piece(Template.Piece p) {
    ObjectNode node = JsonNodeFactory.instance.objectNode();
    if (p.text() != null) {
      return node.put("literal", Template.utf8Of(p.text()));
    }
    if (p.variable() != null) {
      node.put("var", p.variable());
    } else {
      node.put("builtin", p.builtin().name().toLowerCase(Locale.ROOT));
      if (p.builtin() == Template.Builtin.RANDOM) {
        node.put("low", new java.math.BigInteger(Long.toUnsignedString(p.low())));
        node.put("high", new java.math.BigInteger(Long.toUnsignedString(p.high())));
      }
    }
    if (p.filter() != Template.Filter.NONE) {
      node.put("filter", p.filter().name().toLowerCase(Locale.ROOT));
    }
    return node;
  }
}
