/**
 * The console's URLs. Tests and bookmarks rely on them: /console/agents, /console/agents/{id}/chat (the
 * playground), /console/runs/{id} (a trace), /console/audit, /console/settings. Pages other than sign-in are split into their own chunks.
 */
import { lazy } from 'react';
import { createBrowserRouter, Navigate } from 'react-router';
import { Shell } from './components/shell.tsx';
import { SignIn } from './pages/sign-in.tsx';

const AgentsPage = lazy(() => import('./pages/agents.tsx'));
const AgentEditorPage = lazy(() => import('./pages/agent-editor.tsx'));
const PlaygroundPage = lazy(() => import('./pages/playground.tsx'));
const SessionsPage = lazy(() => import('./pages/sessions.tsx'));
const SessionPage = lazy(() => import('./pages/session.tsx'));
const RunsPage = lazy(() => import('./pages/runs.tsx'));
const TracePage = lazy(() => import('./pages/trace.tsx'));
const WebhooksPage = lazy(() => import('./pages/webhooks.tsx'));
const WebhookPage = lazy(() => import('./pages/webhook.tsx'));
const FilesPage = lazy(() => import('./pages/files.tsx'));
const UsagePage = lazy(() => import('./pages/usage.tsx'));
const ConnectorsPage = lazy(() => import('./pages/connectors.tsx'));
const SchedulesPage = lazy(() => import('./pages/schedules.tsx'));
const SchedulePage = lazy(() => import('./pages/schedule.tsx'));
const ApprovalsPage = lazy(() => import('./pages/approvals.tsx'));
const AuditPage = lazy(() => import('./pages/audit.tsx'));
const SettingsPage = lazy(() => import('./pages/settings.tsx'));
const NotFoundPage = lazy(() => import('./pages/not-found.tsx'));

export const router = createBrowserRouter(
  [
    { path: '/sign-in', element: <SignIn /> },
    {
      element: <Shell />,
      children: [
        { index: true, element: <Navigate to="/agents" replace /> },
        { path: 'agents', element: <AgentsPage /> },
        { path: 'agents/new', element: <AgentEditorPage /> },
        { path: 'agents/:id', element: <AgentEditorPage /> },
        { path: 'agents/:id/chat', element: <PlaygroundPage /> },
        { path: 'sessions', element: <SessionsPage /> },
        { path: 'sessions/:id', element: <SessionPage /> },
        { path: 'runs', element: <RunsPage /> },
        { path: 'runs/:id', element: <TracePage /> },
        { path: 'webhooks', element: <WebhooksPage /> },
        { path: 'webhooks/:id', element: <WebhookPage /> },
        { path: 'files', element: <FilesPage /> },
        { path: 'usage', element: <UsagePage /> },
        { path: 'connectors', element: <ConnectorsPage /> },
        { path: 'schedules', element: <SchedulesPage /> },
        { path: 'schedules/:id', element: <SchedulePage /> },
        { path: 'approvals', element: <ApprovalsPage /> },
        { path: 'audit', element: <AuditPage /> },
        { path: 'settings', element: <SettingsPage /> },
        { path: '*', element: <NotFoundPage /> },
      ],
    },
  ],
  { basename: '/console' },
);
