package dev.idem.testing;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;

/** How the test-service locators tell whether a server already listens somewhere. */
public final class Ports {

  private Ports() {}

  /**
   * Tries a TCP connection for at most one second.
   *
   * @param host the host
   * @param port the port
   * @return {@code true} when something accepted the connection
   */
  public static boolean listening(String host, int port) {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(host, port), 1000);
      return true;
    } catch (IOException e) {
      return false;
    }
  }
}
