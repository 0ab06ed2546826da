from proofgym.cli.main import main

main()
