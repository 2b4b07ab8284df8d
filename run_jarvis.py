def main():
    raise SystemExit("run_jarvis is not written yet")
