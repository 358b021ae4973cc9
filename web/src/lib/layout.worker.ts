// Lays out the lineage graph off the main thread: the page stays responsive while a large
// graph is placed.
import { layout, type GraphInput } from "./layout";

self.onmessage = (event: MessageEvent<{ id: number; graph: GraphInput }>) => {
  const { id, graph } = event.data;
  (self as unknown as Worker).postMessage({ id, layout: layout(graph) });
};
