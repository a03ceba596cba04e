package dev.idem.kafka.testing;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;

/** Decodes UTF-8 text and rejects malformed bytes, so tests can publish real poison pills. */
public final class StrictUtf8Deserializer implements Deserializer<String> {

  /** Bytes that are not UTF-8: a poison pill for this deserializer. */
  public static final byte[] POISON = {(byte) 0xC3, (byte) 0x28, (byte) 0xFF, (byte) 0xFE};

  @Override
  public String deserialize(String topic, byte[] data) {
    if (data == null) {
      return null;
    }
    try {
      return StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(data)).toString();
    } catch (CharacterCodingException e) {
      throw new SerializationException("value of " + topic + " is not UTF-8", e);
    }
  }
}
