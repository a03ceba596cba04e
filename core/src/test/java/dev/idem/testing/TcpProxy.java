package dev.idem.testing;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A loopback TCP forwarder that a test can cut and restore, to take a real server "down" for
 * one client without stopping it for everyone else. {@link #cut()} closes every forwarded
 * connection and refuses new ones; {@link #restore()} accepts again on the same port.
 * {@link #stall()} keeps every socket open but stops moving bytes (a network that goes silent
 * without a reset), until {@link #resume()}.
 */
public final class TcpProxy implements AutoCloseable {

  private final String targetHost;
  private final int targetPort;
  private final int port;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private volatile ServerSocket server;
  private final Object stallLock = new Object();
  private boolean stalled;

  /**
   * Starts forwarding from a free loopback port to the target.
   *
   * @param targetHost the real server's host
   * @param targetPort the real server's port
   */
  public TcpProxy(String targetHost, int targetPort) {
    this.targetHost = targetHost;
    this.targetPort = targetPort;
    try (ServerSocket probe = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
      this.port = probe.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    restore();
  }

  /**
   * The loopback port clients should connect to.
   *
   * @return the port
   */
  public int port() {
    return port;
  }

  /** Refuses new connections and closes the open ones, as a crashed server would. */
  public synchronized void cut() {
    closeQuietly(server);
    server = null;
    for (Socket s : sockets) {
      closeQuietly(s);
    }
    sockets.clear();
  }

  /** Stops forwarding bytes in both directions on every connection, open or new; sockets stay open. */
  public void stall() {
    synchronized (stallLock) {
      stalled = true;
    }
  }

  /** Forwards bytes again after {@link #stall()}. */
  public void resume() {
    synchronized (stallLock) {
      stalled = false;
      stallLock.notifyAll();
    }
  }

  private void awaitNotStalled() throws InterruptedException {
    synchronized (stallLock) {
      while (stalled) {
        stallLock.wait();
      }
    }
  }

  /** Accepts connections again. */
  public synchronized void restore() {
    if (server != null) {
      return;
    }
    try {
      ServerSocket s = new ServerSocket();
      s.setReuseAddress(true);
      s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
      server = s;
      Thread acceptor = new Thread(() -> acceptLoop(s), "tcp-proxy-accept-" + port);
      acceptor.setDaemon(true);
      acceptor.start();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void acceptLoop(ServerSocket s) {
    while (!s.isClosed()) {
      try {
        Socket client = s.accept();
        Socket upstream = new Socket(targetHost, targetPort);
        sockets.add(client);
        sockets.add(upstream);
        pump(client, upstream);
        pump(upstream, client);
      } catch (IOException e) {
        // closed by cut(), or the target refused: the client sees a closed connection
      }
    }
  }

  private void pump(Socket from, Socket to) {
    Thread t = new Thread(() -> {
      byte[] buffer = new byte[16 * 1024];
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        int n;
        while ((n = in.read(buffer)) >= 0) {
          awaitNotStalled();
          out.write(buffer, 0, n);
          out.flush();
        }
      } catch (IOException e) {
        // one side went away
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      } finally {
        closeQuietly(from);
        closeQuietly(to);
      }
    }, "tcp-proxy-pump-" + port);
    t.setDaemon(true);
    t.start();
  }

  private static void closeQuietly(AutoCloseable c) {
    if (c == null) {
      return;
    }
    try {
      c.close();
    } catch (Exception e) {
      // nothing to do
    }
  }

  @Override
  public void close() {
    resume();
    cut();
  }
}
