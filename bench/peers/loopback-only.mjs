// Preloaded into Portkey's gateway (node --import): it listens on every interface and has no host option, and the
// bench binds loopback only. A listen(port) without a host gets 127.0.0.1; nothing else changes.
import net from "node:net";

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === "number" && (args[1] === undefined || typeof args[1] === "function")) args.splice(1, args[1] === undefined ? 1 : 0, "127.0.0.1");
  return listen.apply(this, args);
};
