/**
 * What a browser bundler resolves for phoenix-link's Node-only entries (`phoenix-link/server`,
 * `/metrics`, `/visualizer`, `/testing`: package.json "exports", the "browser" condition). They
 * listen on sockets, read files and run prom-client, which no page can; the import below names a
 * file that does not exist, so the bundle fails at build time with this sentence in the error
 * (esbuild: Could not resolve "./…"; Vite: failed to resolve import "./…") instead of shipping
 * code that fails later in the page. In a browser, import { createLink } from 'phoenix-link'.
 */
import './phoenix-link-server-metrics-visualizer-and-testing-run-only-in-Node--in-a-browser-import-createLink-from-phoenix-link.js'
