/**
 * The page's URL search parameters, and a way to change some of them that applies each change to the URL as it is
 * when the change is made. react-router hands a functional update the parameters of the render that made the
 * callback, so two quick changes before the next render (a filter cleared, then another typed) would bring the
 * first one back; the browser's location is already the newest.
 */
import { useSearchParams } from 'react-router';

export function useUrlParams(): [URLSearchParams, (edit: (next: URLSearchParams) => void) => void] {
  const [params, setParams] = useSearchParams();
  const update = (edit: (next: URLSearchParams) => void) => {
    const next = new URLSearchParams(window.location.search);
    edit(next);
    setParams(next);
  };
  return [params, update];
}
