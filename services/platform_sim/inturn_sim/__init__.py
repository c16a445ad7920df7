"""The platform simulator: a WhatsApp-Cloud-API double for local runs, tests and benchmarks.

``inturn_sim.app.create_app(settings)`` builds the aiohttp application;
``inturn_sim.run.running_sim(settings)`` serves it in-process; ``inturn sim`` runs it as a process.
See docs/platform-simulator.md.
"""
