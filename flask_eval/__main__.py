from flask_eval.cli import main

main()
