// A layered drawing of a DAG: layers by longest path from the sources, order within a
// layer by the mean position of each node's parents (two sweeps), fixed-size boxes. Pure,
// so it runs in a worker (lib/layout.worker.ts) and in tests alike.

export interface GraphInput {
  nodes: string[];
  /** [from, to]: `to` reads `from`. */
  edges: [string, string][];
}

export interface Placed {
  id: string;
  x: number;
  y: number;
}

export interface Layout {
  nodes: Placed[];
  width: number;
  height: number;
}

export const NODE_WIDTH = 170;
export const NODE_HEIGHT = 34;
const GAP_X = 70;
const GAP_Y = 16;

export function layout(graph: GraphInput): Layout {
  const known = new Set(graph.nodes);
  const parents = new Map<string, string[]>();
  for (const id of graph.nodes) parents.set(id, []);
  for (const [from, to] of graph.edges) {
    if (known.has(from) && known.has(to)) parents.get(to)?.push(from);
  }
  const depth = new Map<string, number>();
  const visiting = new Set<string>();
  const depthOf = (id: string): number => {
    const found = depth.get(id);
    if (found !== undefined) return found;
    if (visiting.has(id)) return 0; // a cycle cannot happen in a compiled project; be safe
    visiting.add(id);
    const value = Math.max(-1, ...(parents.get(id) ?? []).map(depthOf)) + 1;
    visiting.delete(id);
    depth.set(id, value);
    return value;
  };
  const layers: string[][] = [];
  for (const id of [...graph.nodes].sort()) {
    const d = depthOf(id);
    (layers[d] ??= []).push(id);
  }
  const position = new Map<string, number>();
  for (let sweep = 0; sweep < 2; sweep += 1) {
    for (const layer of layers) {
      if (!layer) continue;
      const score = (id: string) => {
        const ps = (parents.get(id) ?? []).map((p) => position.get(p)).filter((p): p is number => p !== undefined);
        return ps.length ? ps.reduce((a, b) => a + b, 0) / ps.length : (position.get(id) ?? 0);
      };
      layer.sort((a, b) => score(a) - score(b) || a.localeCompare(b));
      layer.forEach((id, index) => position.set(id, index));
    }
  }
  const nodes: Placed[] = [];
  let tallest = 0;
  layers.forEach((layer, column) => {
    (layer ?? []).forEach((id, row) => {
      nodes.push({ id, x: 10 + column * (NODE_WIDTH + GAP_X), y: 10 + row * (NODE_HEIGHT + GAP_Y) });
    });
    tallest = Math.max(tallest, (layer ?? []).length);
  });
  return {
    nodes,
    width: 20 + layers.length * (NODE_WIDTH + GAP_X),
    height: 20 + tallest * (NODE_HEIGHT + GAP_Y),
  };
}

/** The nodes within `hops` edges (either direction) of `focus`. */
export function neighbourhood(graph: GraphInput, focus: string[], hops: number): Set<string> {
  const near = new Set(focus);
  let frontier = [...focus];
  for (let hop = 0; hop < hops; hop += 1) {
    const next: string[] = [];
    for (const [from, to] of graph.edges) {
      for (const id of frontier) {
        if (from === id && !near.has(to)) next.push(to);
        if (to === id && !near.has(from)) next.push(from);
      }
    }
    for (const id of next) near.add(id);
    frontier = next;
  }
  return near;
}
