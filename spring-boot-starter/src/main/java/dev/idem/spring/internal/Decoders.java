package dev.idem.spring.internal;

import dev.idem.spring.IdemProperties;
import dev.idem.spring.MessageDecoder;
import java.nio.charset.StandardCharsets;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.NoSuchBeanDefinitionException;
import org.springframework.util.ClassUtils;

/** The decoder of a configured consumer: a named bean, UTF-8 text, raw bytes, or JSON through Jackson 3. */
final class Decoders {

  private Decoders() {}

  @SuppressWarnings("unchecked")
  static MessageDecoder<Object> of(String at, IdemProperties.Consumer c, BeanFactory beans) {
    if (c.getDecoder() != null) {
      try {
        return beans.getBean(c.getDecoder(), MessageDecoder.class);
      } catch (NoSuchBeanDefinitionException e) {
        throw new IllegalArgumentException(at + ".decoder names no MessageDecoder bean: '" + c.getDecoder() + "'", e);
      }
    }
    String type = c.getPayloadType() == null ? "string" : c.getPayloadType().trim();
    if (type.equalsIgnoreCase("string")) {
      return body -> new String(body, StandardCharsets.UTF_8);
    }
    if (type.equalsIgnoreCase("bytes")) {
      return body -> body;
    }
    ClassLoader loader = Decoders.class.getClassLoader();
    if (!ClassUtils.isPresent("tools.jackson.databind.ObjectMapper", loader)) {
      throw new IllegalArgumentException(at + ".payload-type " + type + " is read as JSON, which needs Jackson 3 "
          + "(tools.jackson.core:jackson-databind, e.g. through spring-boot-starter-json) on the class path");
    }
    Class<?> payloadClass;
    try {
      payloadClass = ClassUtils.forName(type, loader);
    } catch (ClassNotFoundException | LinkageError e) {
      throw new IllegalArgumentException(
          at + ".payload-type must be string, bytes or a class name; no class " + type + " was found", e);
    }
    return JsonDecoders.of(payloadClass, beans);
  }
}
