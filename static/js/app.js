// Countersign's only script. Kept in a static file so the CSP needs no 'unsafe-inline'.
