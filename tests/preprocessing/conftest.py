def pytest_configure(config):
    # Registered here too, in case the project's pytest config does not list it yet.
    config.addinivalue_line("markers", "slow: long-running test, deselected by -m 'not slow'")
