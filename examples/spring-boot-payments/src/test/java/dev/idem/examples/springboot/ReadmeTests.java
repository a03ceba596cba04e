package dev.idem.examples.springboot;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The README's Spring Boot section quotes this example's files; these tests keep them in step. */
class ReadmeTests {

  private static String readme() throws Exception {
    return Files.readString(Path.of("../../README.md"));
  }

  @Test
  void theReadmeQuotesTheExamplesApplicationYmlVerbatim() throws Exception {
    String yml = Files.readString(Path.of("src/main/resources/application.yml"));
    assertThat(readme()).contains("```yaml\n" + yml + "```");
  }

  @Test
  void theReadmeQuotesTheExamplesHandlerMethodVerbatim() throws Exception {
    String source = Files.readString(Path.of("src/main/java/dev/idem/examples/springboot/PaymentHandler.java"));
    String method = source.substring(source.indexOf("  @Override\n  public Publisher<?> handle"), source.lastIndexOf("  }\n") + 4);
    assertThat(readme()).contains(method);
  }
}
