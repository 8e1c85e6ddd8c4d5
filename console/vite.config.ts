/**
 * Builds the console into dist/, which the server serves at /console. Asset names carry a content hash (cached for
 * a year); nothing is inlined into index.html, so the page runs under a CSP without 'unsafe-inline'.
 */
import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsInlineLimit: 0,
    target: 'es2022',
    sourcemap: false,
    reportCompressedSize: false,
  },
  server: {
    // `npm run dev` in console/: the API of a server started with npm start.
    proxy: { '/v1': 'http://127.0.0.1:8080' },
  },
});
