import { after } from "node:test";
import type { Socket } from "node:net";

/**
 * A test file's process must end once its tests have: one that stays alive
 * holds something a close left open (a socket, a timer, a client). The runner
 * only notices that at its file timeout, minutes later, and says nothing of
 * what was held. This names it: if the process is still alive `graceMs` after
 * the file's last test, the resources keeping it alive are written to stderr,
 * and the process exits with a failure. The clock starts with the first root
 * after-hook (this one, registered when the harness is imported), so the
 * grace also covers a file's own root hooks closing its services.
 */
export function watchExit(graceMs = 120_000): void {
  after(() => {
    setTimeout(() => {
      const sockets = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles()
        .filter((handle): handle is Socket => typeof (handle as Socket)?.remotePort === "number" || typeof (handle as Socket)?.localPort === "number")
        .map((socket) => `${socket.localAddress}:${socket.localPort} → ${socket.remoteAddress}:${socket.remotePort}`);
      process.stderr.write(
        `\n# ${process.argv[1] ?? "this test file"} was still alive ${graceMs} ms after its last test; ` +
          `held: ${process.getActiveResourcesInfo().join(", ")}; sockets: ${sockets.join("; ") || "none"}\n`,
      );
      process.exit(1);
    }, graceMs).unref();
  });
}
