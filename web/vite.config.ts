import { defineConfig } from "vite";
import { svelte } from "@sveltejs/vite-plugin-svelte";

// `npm run build` writes dist/, which the stb binary embeds (crates/stb-server/build.rs).
// For UI work, `STB_DEV_URL=http://127.0.0.1:8000 npx vite` proxies the API to a running
// `stb dev`.
export default defineConfig({
  plugins: [svelte()],
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // Reproducible file names from content hashes only; no source maps in the binary.
    sourcemap: false,
    assetsInlineLimit: 0,
  },
  server: {
    proxy: {
      "/api": { target: process.env.STB_DEV_URL ?? "http://127.0.0.1:8000", changeOrigin: false },
    },
  },
});
