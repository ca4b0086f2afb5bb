// A fresh `mailroom serve` per test, which a test may kill -9 and start again on the same
// data directory and port. The binary is $MAILROOM_BIN, or $CARGO_TARGET_DIR/debug/mailroom
// (default target/) of the repository this package sits in.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

function binary() {
  if (process.env.MAILROOM_BIN) return process.env.MAILROOM_BIN;
  const target = process.env.CARGO_TARGET_DIR ?? join(REPO, "target");
  return join(target, "debug", "mailroom");
}

export class Server {
  constructor(extra = []) {
    this.dir = mkdtempSync(join(tmpdir(), "mailroom-ts-"));
    this.listen = "127.0.0.1:0";
    this.extra = extra;
    this.url = "";
    this.child = null;
  }

  static async start(extra = []) {
    const server = new Server(extra);
    await server.start();
    return server;
  }

  /** Starts the server and waits for its `mailroom listening on` line. */
  async start() {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("MAILROOM_")));
    env.RUST_LOG = "warn";
    const args = ["serve", "--listen", this.listen, "--data", join(this.dir, "store"), "--fsync", "never", ...this.extra];
    this.child = spawn(binary(), args, { env, stdio: ["ignore", "pipe", "inherit"] });
    const lines = createInterface({ input: this.child.stdout });
    this.url = await new Promise((found, failed) => {
      lines.on("line", (line) => {
        if (line.startsWith("mailroom listening on ")) found(line.split(" ").at(-1));
      });
      this.child.once("exit", (code) => failed(new Error(`server exited before listening: ${code}`)));
    });
    this.listen = this.url.replace("http://", "");
  }

  /** SIGKILL: no shutdown path runs. */
  async kill() {
    if (this.child === null) return;
    const child = this.child;
    this.child = null;
    if (child.exitCode !== null) return;
    const exited = new Promise((done) => child.once("exit", done));
    child.kill("SIGKILL");
    await exited;
  }

  /** SIGKILL, then a start on the same data directory and port. */
  async restart() {
    await this.kill();
    await this.start();
  }

  async stop() {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
