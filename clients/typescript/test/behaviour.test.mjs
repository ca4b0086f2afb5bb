// The shared behaviour suite (clients/behaviour) against the TypeScript client.

import { test } from "node:test";

import { Runner, scenarios } from "./scenario.mjs";
import { Server } from "./server.mjs";

for (const [name, scenario] of scenarios()) {
  test(name, async () => {
    const server = await Server.start();
    const runner = new Runner(server);
    try {
      await runner.run(scenario);
    } finally {
      runner.close();
      await server.stop();
    }
  });
}
