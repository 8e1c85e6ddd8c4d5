/** Each page names itself in the document title (tests and browser history rely on it). */
import { useEffect } from 'react';

export function usePageTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Agentry console`;
  }, [title]);
}
