/** Any console URL that names no page. */
import { Link } from 'react-router';
import { usePageTitle } from '../components/title.ts';

export default function NotFoundPage() {
  usePageTitle('Not found');
  return (
    <section>
      <h1>Not found</h1>
      <p>
        This page does not exist. Go to the <Link to="/agents">agents</Link>.
      </p>
    </section>
  );
}
