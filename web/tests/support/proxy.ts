// A TCP proxy in front of the warehouse that a test can cut and restore: the warehouse
// "goes down" for the dev server without touching the shared stack.
import { createConnection, createServer, type Server, type Socket } from "node:net";

export class CuttableProxy {
  #server: Server | null = null;
  #sockets = new Set<Socket>();
  port = 0;

  constructor(
    private readonly host: string,
    private readonly targetPort: number,
  ) {}

  async open(port = 0): Promise<number> {
    const server = createServer((client) => {
      const upstream = createConnection({ host: this.host, port: this.targetPort });
      for (const socket of [client, upstream]) {
        this.#sockets.add(socket);
        socket.on("close", () => this.#sockets.delete(socket));
        socket.on("error", () => socket.destroy());
      }
      client.pipe(upstream);
      upstream.pipe(client);
    });
    await new Promise<void>((ready) => server.listen(port, "127.0.0.1", ready));
    const address = server.address();
    this.port = typeof address === "object" && address ? address.port : port;
    this.#server = server;
    return this.port;
  }

  /** Refuses new connections and ends the open ones. */
  async cut(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((done) => (this.#server ? this.#server.close(() => done()) : done()));
    this.#server = null;
  }
}
