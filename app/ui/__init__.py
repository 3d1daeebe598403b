"""The live dashboard at /ui: static HTML, JS and CSS, no build step."""
