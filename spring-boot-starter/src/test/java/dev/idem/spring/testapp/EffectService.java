package dev.idem.spring.testapp;

import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Propagation;
import org.springframework.transaction.annotation.Transactional;
import reactor.core.publisher.Mono;

/** A {@code @Transactional} service on the application's transaction manager, as handlers call them. */
@Service
public class EffectService {

  private final EffectRepository effects;

  /**
   * Creates the service.
   *
   * @param effects the repository
   */
  public EffectService(EffectRepository effects) {
    this.effects = effects;
  }

  /**
   * Writes an effect, then fails when told to (after the write, so the write must roll back).
   *
   * @param messageId the message
   * @param note the note
   * @param fail whether to fail after writing
   * @return the saved effect, or the error
   */
  @Transactional
  public Mono<Effect> record(String messageId, String note, boolean fail) {
    Mono<Effect> saved = effects.save(new Effect(null, messageId, note));
    return fail ? saved.then(Mono.error(new IllegalStateException("the service failed after writing"))) : saved;
  }

  /**
   * Writes an effect in a transaction of its own ({@code REQUIRES_NEW}): it commits whatever the
   * caller's transaction does.
   *
   * @param messageId the message
   * @param note the note
   * @return the saved effect
   */
  @Transactional(propagation = Propagation.REQUIRES_NEW)
  public Mono<Effect> recordOnItsOwn(String messageId, String note) {
    return effects.save(new Effect(null, messageId, note));
  }
}
