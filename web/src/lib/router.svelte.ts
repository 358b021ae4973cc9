// The URL owns the page and its state (selection, filters, ids): views are shareable and
// survive a reload. History API, no hash.

class Location {
  path = $state(window.location.pathname);
  search = $state(window.location.search);

  constructor() {
    window.addEventListener("popstate", () => this.sync());
  }

  sync(): void {
    this.path = window.location.pathname;
    this.search = window.location.search;
  }

  get params(): URLSearchParams {
    return new URLSearchParams(this.search);
  }
}

export const location = new Location();

export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (options.replace) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  location.sync();
  window.scrollTo(0, 0);
}

/** Replaces the query string, keeping the path (state changes that should not add history). */
export function setParams(params: URLSearchParams): void {
  const query = params.toString();
  navigate(`${location.path}${query ? `?${query}` : ""}`, { replace: true });
}

/** Follows same-origin links without reloading the page. */
export function link(node: HTMLAnchorElement): { destroy(): void } {
  const click = (event: MouseEvent) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
    const url = new URL(node.href);
    if (url.origin !== window.location.origin) return;
    event.preventDefault();
    navigate(url.pathname + url.search);
  };
  node.addEventListener("click", click);
  return { destroy: () => node.removeEventListener("click", click) };
}
