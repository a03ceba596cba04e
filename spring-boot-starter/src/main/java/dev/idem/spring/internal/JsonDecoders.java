package dev.idem.spring.internal;

import dev.idem.spring.MessageDecoder;
import org.springframework.beans.factory.BeanFactory;
import tools.jackson.databind.ObjectMapper;
import tools.jackson.databind.json.JsonMapper;

/** JSON payloads through the application's Jackson 3 {@code JsonMapper}; loaded only when Jackson is present. */
final class JsonDecoders {

  private JsonDecoders() {}

  static MessageDecoder<Object> of(Class<?> type, BeanFactory beans) {
    ObjectMapper mapper = beans.getBeanProvider(JsonMapper.class).getIfAvailable(() -> JsonMapper.builder().build());
    return body -> mapper.readValue(body, type);
  }
}
